package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/compact-host/compact-host/host/store/storeopen"
	"github.com/compact-host/compact-host/internal/recallmcp"
)

type mcpOptions struct {
	sessionFile  string
	store        string
	conversation string
	session      string
	serveURL     string
	serveToken   string
	listen       string
	tokenFile    string
}

func newMCPCmd(g *globals) *cobra.Command {
	o := &mcpOptions{}
	cmd := &cobra.Command{
		Use:   "mcp (--session-file FILE | --conversation ID [--store URL] | --session ID --serve-url URL) [--listen HOST:PORT]",
		Short: "Serve the recall and search tools over MCP, so the model can read what a compaction folded",
		Long: `A summary compact-host writes names what it folded with markers:
[recall:s-…] for the folded messages and [recall:t-…] for each large tool
output. The originals stay where they were: in the agent's session file or
the session log, in the proxy's store, or beside a session of serve.
'compact-host mcp' is a Model Context Protocol server that
gives the agent two tools over them:

  recall(ref, page)          the original behind a marker, word for word,
                             in pages of 16 KB (64 pages at most)
  search(query, regexp, limit)
                             the best places a text (case-insensitive) or an
                             RE2 regular expression occurs, each with the
                             marker to recall and a snippet; queries of at
                             most 1 KB, 50 hits at most; a search stops at
                             32 MB of text or 500 ms, and says so

--session-file names the conversation: the agent's session file (a Claude
Code session, a Codex rollout, any format compact-host reads) or a
compact-host session log. Every message in it can be recalled, also those
behind the agent's own compactions; the file is read again when it grows.

--conversation names a conversation the compact-host proxy compacted: the
originals it kept in its store (--store, the proxy's own setting; default
$COMPACT_HOST_STORE, the config's store, or disk). The ID is the one the
proxy's conversations report shows (GET /_compact-host/conversations with
the agent's credential). A proxy started with --mcp serves the same tools
itself, for any conversation of the credential the agent sends.

--session names a session kept by 'compact-host serve' instead, read from
serve's API (GET /v1/sessions/{id}/originals) at --serve-url, with the
token the session was made with (--serve-token-env names the variable that
holds it), so a token reaches its own sessions only. serve keeps what each
compaction folded beside the session; the session is read again when it
changed.

The server speaks MCP over stdin and stdout, as an agent starts it, or with
--listen over streamable HTTP. HTTP listens on loopback only, unless
--token-file names the bearer tokens to require; bodies are limited to
1 MiB. A marker of another conversation, a malformed reference or a query
over the limit is a tool error that says so, and names nothing else.`,
		Example: `  # Claude Code: claude --mcp-config mcp.json, with mcp.json
  #   {"mcpServers":{"compact-host":{"command":"compact-host","args":["mcp","--session-file","SESSION.jsonl"]}}}
  compact-host mcp --session-file ~/.claude/projects/-home-me-app/0b1c….jsonl

  # Codex: in ~/.codex/config.toml
  #   [mcp_servers.compact-host]
  #   command = "compact-host"
  #   args = ["mcp", "--session-file", "ROLLOUT.jsonl"]

  # What the proxy folded of one conversation, from its store:
  compact-host mcp --store redis://127.0.0.1:6379/0 --conversation 3f9c…e1
  # A session of compact-host serve, with the token it was made with
  COMPACT_HOST_TOKEN=… compact-host mcp --session ticket-4711 \
    --serve-url http://127.0.0.1:8377 --serve-token-env COMPACT_HOST_TOKEN

  # Any client over streamable HTTP: url = "http://127.0.0.1:8378/"
  compact-host mcp --session-file rollout.jsonl --listen 127.0.0.1:8378`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMCP(cmd.Context(), g, o) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.sessionFile, "session-file", "", "the conversation: an agent's session file or a compact-host session log")
	fl.StringVar(&o.conversation, "conversation", "", "the conversation: a conversation ID of the proxy (64 hex digits), read from its store")
	fl.StringVar(&o.store, "store", "", "with --conversation: the proxy's store, as its --store names it: "+storeopen.Usage)
	fl.StringVar(&o.session, "session", "", "the conversation: the ID of a session kept by compact-host serve (with --serve-url)")
	fl.StringVar(&o.serveURL, "serve-url", "", "with --session: the base URL of compact-host serve, e.g. http://127.0.0.1:8377")
	fl.StringVar(&o.serveToken, "serve-token-env", "", "with --session: name of the environment variable holding the session's serve token")
	fl.StringVar(&o.listen, "listen", "", "serve streamable HTTP on HOST:PORT instead of stdio (loopback unless --token-file)")
	fl.StringVar(&o.tokenFile, "token-file", "", "with --listen: bearer tokens to require, one a line (\"name:token\" or a bare token); needed to listen beyond loopback")
	return cmd
}

func runMCP(ctx context.Context, g *globals, o *mcpOptions) error {
	src, what, done, err := mcpSource(ctx, g, o)
	if err != nil {
		return err
	}
	defer done()
	log := slog.New(g.logHandler(slog.LevelWarn))
	srv := recallmcp.NewServer(src, Version)
	if o.listen == "" {
		if o.tokenFile != "" {
			return usageError{errors.New("--token-file needs --listen: stdio has no tokens")}
		}
		err := srv.Run(ctx, &mcp.IOTransport{Reader: readCloser{g.io.In}, Writer: writeCloser{g.io.Out}, MaxLineLength: recallmcp.MaxBodyBytes})
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return withCode(ExitError, err)
		}
		return nil
	}
	var tokens []string
	if o.tokenFile != "" {
		ts, err := readTokenFile(o.tokenFile)
		if err != nil {
			return withCode(ExitInput, err)
		}
		for _, t := range ts {
			tokens = append(tokens, t.Secret)
		}
	} else if !loopback(o.listen) {
		return usageError{fmt.Errorf("--listen %s is reachable beyond this machine: give --token-file, or listen on 127.0.0.1", o.listen)}
	}
	ln, err := listen(o.listen)
	if err != nil {
		return err
	}
	a := &app{g: g, log: log}
	hs := &http.Server{
		Handler:           recallmcp.Handler(srv, recallmcp.HTTPOptions{Tokens: tokens, Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	a.note("compact-host %s: MCP on http://%s/ for %s", Version, ln.Addr(), what)
	return serveUntilDone(ctx, a, hs, ln, 10*time.Second)
}

// readCloser and writeCloser let the MCP transport close stdio's ends
// without closing the process's files, which the CLI's caller owns.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
