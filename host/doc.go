// Package host is the compaction engine an agent loop calls before every
// model call and after every batch of tool results.
//
//	eng, _ := host.New(host.Config{Model: "claude-sonnet-4-5"})
//	sess, _ := eng.OpenSession("run.jsonl")
//	sess.Append(userMessage)
//	for {
//		if _, err := eng.EnsureFits(ctx, sess, host.Request{ToolSchemaTokens: n}); err != nil { ... }
//		reply, err := callModel(sess.Context())
//		if retry, _ := eng.RecoverOverflow(ctx, sess, err); retry { continue }
//		sess.Append(reply) // with its reported usage
//		...
//	}
//
// A Session is an append-only log: a compaction appends an entry naming its
// summary and the last folded message, so the originals stay and Undo
// restores them exactly. Context returns what the model should see.
package host
