package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/compact-host/compact-host/host/store"
	"github.com/compact-host/compact-host/internal/recallmcp"
	"github.com/compact-host/compact-host/internal/recallstore"
)

// mcpSource is the conversation `compact-host mcp` answers for: a session
// file, or a conversation the proxy kept in its store. It is read once
// here, so that a wrong name fails now, with its reason, not at the
// model's first call. what names it for the start-up note; done releases it.
func mcpSource(ctx context.Context, g *globals, o *mcpOptions) (src recallmcp.Source, what string, done func(), err error) {
	none := func() {}
	switch {
	case o.sessionFile != "" && o.conversation != "":
		return nil, "", none, usageError{errors.New("give the conversation once: --session-file FILE or --conversation ID")}
	case o.store != "" && o.conversation == "":
		return nil, "", none, usageError{errors.New("--store needs --conversation ID: the conversation of the proxy to read")}
	case o.conversation != "":
		return mcpStoreSource(ctx, g, o)
	case o.sessionFile == "":
		return nil, "", none, usageError{errors.New("mcp needs the conversation: --session-file FILE, or --conversation ID of the proxy")}
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
