package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/recallmcp"
	"github.com/compact-host/compact-host/internal/recallstore"
)

// mcpSource is the conversation `compact-host mcp` answers for: a session
// file, a conversation the proxy kept in its store, or a session of serve. It is read once
// here, so that a wrong name fails now, with its reason, not at the
// model's first call. what names it for the start-up note; done releases it.
func mcpSource(ctx context.Context, g *globals, o *mcpOptions) (src recallmcp.Source, what string, done func(), err error) {
	none := func() {}
	named := 0
	for _, v := range []string{o.sessionFile, o.conversation, o.session} {
		if v != "" {
			named++
		}
	}
	switch {
	case named > 1:
		return nil, "", none, usageError{errors.New("give the conversation once: --session-file FILE, --conversation ID or --session ID")}
	case o.store != "" && o.conversation == "":
		return nil, "", none, usageError{errors.New("--store needs --conversation ID: the conversation of the proxy to read")}
	case (o.serveURL != "" || o.serveToken != "") && o.session == "":
		return nil, "", none, usageError{errors.New("--serve-url and --serve-token-env go with --session")}
	case o.conversation != "":
		return mcpStoreSource(ctx, g, o)
	case o.session != "":
		return mcpServeSource(ctx, g, o)
	case o.sessionFile == "":
		return nil, "", none, usageError{errors.New("mcp needs the conversation: --session-file FILE, --conversation ID of the proxy, or --session ID --serve-url URL")}
	}
	info, err := os.Stat(o.sessionFile)
	if err != nil {
		return nil, "", none, withCode(ExitInput, fmt.Errorf("--session-file: %w", err))
	}
	if !info.Mode().IsRegular() {
		return nil, "", none, withCode(ExitInput, fmt.Errorf("--session-file %s: not a regular file (mode %s)", o.sessionFile, info.Mode().Type()))
	}
	fs := &recallmcp.FileSource{Path: o.sessionFile}
	if _, err := fs.Index(ctx); err != nil {
		return nil, "", none, withCode(ExitInput, fmt.Errorf("--session-file %s: %w", o.sessionFile, err))
	}
	return fs, o.sessionFile, none, nil
}

// mcpStoreSource opens the proxy's store and finds the conversation in it.
func mcpStoreSource(ctx context.Context, g *globals, o *mcpOptions) (recallmcp.Source, string, func(), error) {
	none := func() {}
	if err := recallstore.CheckConversation(o.conversation); err != nil {
		return nil, "", none, usageError{fmt.Errorf("--conversation: %w", err)}
	}
	a, err := newApp(g, engineFlags{})
	if err != nil {
		return nil, "", none, err
	}
	st, err := openStore(ctx, a, o.store)
	if err != nil {
		a.close()
		return nil, "", none, err
	}
	done := func() { st.Close(); a.close() }
	ss, ok := st.(store.Sessions)
	if !ok {
		done()
		return nil, "", none, withCode(ExitInput, errors.New("--store: this store keeps no sessions, so no originals"))
	}
	src := &recallmcp.StoreSource{Sessions: ss, Conversation: o.conversation}
	if _, err := src.Index(ctx); err != nil {
		done()
		return nil, "", none, withCode(ExitInput, fmt.Errorf("--conversation %s: %w", o.conversation, err))
	}
	return src, "conversation " + o.conversation, done, nil
}

// mcpServeSource reads a session of compact-host serve through its API,
// with the session's own token.
func mcpServeSource(ctx context.Context, g *globals, o *mcpOptions) (recallmcp.Source, string, func(), error) {
	none := func() {}
	if o.serveURL == "" {
		return nil, "", none, usageError{errors.New("--session needs --serve-url: the compact-host serve that keeps the session")}
	}
	s := &recallmcp.ServeSource{URL: o.serveURL, Session: o.session, Client: &http.Client{Timeout: recallmcp.ServeTimeout}}
	if o.serveToken != "" {
		if s.Token = strings.TrimSpace(g.io.Getenv(o.serveToken)); s.Token == "" {
			return nil, "", none, usageError{fmt.Errorf("--serve-token-env %s: the variable is unset or empty", o.serveToken)}
		}
	}
	if _, err := s.Index(ctx); err != nil {
		return nil, "", none, withCode(ExitInput, fmt.Errorf("--session %s: %w", o.session, err))
	}
	return s, "session " + o.session, none, nil
}
