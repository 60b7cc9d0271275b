// Package server is the HTTP JSON API of `compact-host serve`: the engine
// for agents written in any language. It is stateless per request: the
// caller sends the session, and an engine is built for the request from
// the server's configuration and the request's options, so servers scale
// out behind any load balancer. Sessions by ID (/v1/sessions/{id}) are
// the exception: Options.Store keeps them, so a client sends only its
// new messages, and servers that share a store serve the same sessions.
// The plugin registry is shared for the server's life and watched, so a
// plugin dropped into its directory is usable without a restart.
//
// Requests that work (compact, check, truncate) share a pool of workers
// (Options.MaxConcurrent); the others wait for one within the request
// timeout. A body is read before its request waits for a worker, within
// Options.BodyTimeout, so clients that send slowly hold a connection but
// never a worker. A body over Options.MaxRequestBytes is refused before it
// is read. With Options.Token set, every endpoint but /healthz requires
// "Authorization: Bearer <token>", compared in constant time.
//
// # API
//
//	API (JSON in, JSON out; every body field below, unknown fields are a 400):
//
//	GET /healthz   (no token needed)
//	  200 {"status":"ok","version":"v1.2.3","abi":"v1.0","plugins":3,"broken":0}
//	      plugins counts the plugins that loaded, broken those that did not.
//
//	GET /openapi.json   (no token needed)
//	  200 the OpenAPI 3.1 document of this API and of the proxy's admin
//	      endpoints, for client generators
//
//	GET /metrics
//	  200 Prometheus text: compact_host_proxy_cache_misses_total{reason},
//	      the sessions' cache misses by reason, as the proxy counts them.
//
//	GET /v1/plugins
//	  200 {"dir":"...","plugins":[{"name","source","path","loaded","kinds",
//	      "categories","version","abi","description","overridden","error"}]}
//	      source is builtin, wasm or process; error says why a plugin is broken.
//	      A plugin dropped into dir is listed and usable without a restart.
//
//	POST /v1/compact
//	  {"session":       the session, see below (required)
//	   "format":        "" to detect, or canonical, anthropic, openai,
//	                    claude-code, codex, copilot, mini-swe-agent, swe-agent
//	   "output_format": canonical, anthropic or openai; default: the input's
//	                    format if it is anthropic or openai, else canonical
//	   "options": {"model":              size the budget for this model (catalog)
//	               "context_window":     window in tokens, up to 32,000,000 (every
//	                                     token count: a number, or "16k", "1.5m")
//	               "strategy":           structured, narrative, truncate or a plugin's
//	               "keep_recent_tokens": newest history kept verbatim
//	               "focus":              what the summary must keep (at most 8 KiB)
//	               "recall_hint":        end the summary naming the recall tools (compact-host mcp)
//	               "threshold":          compact only at this share of the budget (0-1)
//	               "thresholds":         {"prune","compact","overhead_reserve","emergency","min_savings"}
//	               "policy":             threshold, or cache-aware: a session whose last
//	                                     update is older than cache_ttl is compacted
//	                                     past cold_share (default 0.5) of the budget
//	               "cold_share":         the cache-aware policy's share (0-1)
//	               "cache_ttl":          the prompt cache's lifetime, 5m (default) or 1h
//	               "dry_run":            plan only: no session in the answer}}
//	  200 {"session": the compacted session in output_format (absent on a dry run),
//	       "messages": the compacted context to send: an array of messages in
//	                   output_format (absent on a dry run),
//	       "system":   with output_format anthropic, the system prompt to send
//	                   with messages, when the session has one,
//	       "report": {"action","format","output_format","messages","model",
//	                  "context_window","budget","tokenizer","threshold",
//	                  "tokens_before","tokens_after","fits","requested_strategy",
//	                  "strategy","offline","messages_folded","messages_kept",
//	                  "fallbacks","plan","model_calls","model_calls_failed",
//	                  "model_usage","cost_usd","skipped_records","repaired",
//	                  "warnings","duration_ms"}}
//	      action: compacted, emergency, pruned, none (under the threshold),
//	      nothing_to_fold (all of it is recent history) or plan (dry run).
//	      Without threshold the session is compacted whatever its size, then
//	      pruned or cut in an emergency if it is still over the budget; fits
//	      false means even that was not enough: fits is tokens_after within
//	      the budget, on a dry run too. strategy is the one that wrote the
//	      summary; when it is not requested_strategy, fallbacks says which
//	      failed and why. model_calls counts the calls to the server's model,
//	      failed ones (model_calls_failed) included; model_usage and cost_usd
//	      add up the successful ones. plan: {"first_kept",
//	      "first_kept_id","folded","kept","turn_prefix","tokens_before",
//	      "tokens_kept","summary_tokens","files_read","files_modified"}.
//
//	POST /v1/check   (the gate an agent runs before each model call)
//	  {"session","format","output_format",
//	   "options": {"model","context_window","strategy","keep_recent_tokens","thresholds",
//	               "policy","cold_share","cache_ttl"},
//	   "request": {"tool_schema_tokens","dynamic_tokens"}   tokens the call adds
//	   "apply":   false: measure only; true: run the gate and return the session}
//	  200 {"format","messages","tokenizer",
//	       "budget": {"context_window","max_output_tokens","input","prune_at",
//	                  "compact_at","emergency_at"},
//	       "tokens","overhead","total","usage","fits",
//	       "action":   what the gate would do: none, prune, compact or emergency,
//	       "decision": with apply: {"action": none, pruned, compacted or emergency,
//	                   "tokens_before","tokens_after","budget","usage","fits"},
//	       "output_format","session": with apply, as for compact,
//	       "context":  with apply: {"messages","system"}, as for compact,
//	       "fallbacks","model_calls","model_calls_failed","model_usage",
//	       "cost_usd": with apply, as for compact, "warnings"}
//
//	POST /v1/truncate
//	  {"tool": the tool that produced the output (picks the category),
//	   "category": head-tail, match-list, file-content, generic or a plugin's,
//	   "content": the output (a string, required),
//	   "max_tokens": the cap, notice included; 0: the server's limit}
//	  200 {"content","category","truncated","bytes_before","bytes_after",
//	       "tokens_before","tokens_after"}
//
//	PUT /v1/sessions/{id}   (sessions by ID: the store keeps the conversation)
//	  {"session","format","options": as for compact (dry_run refused); the
//	   options are kept for every later append,
//	   "if_revision": replace only at this revision; 0: only create}
//	  201 (created) or 200 (replaced) {"id","revision","created","action",
//	       "tokens","compactions","updated_at","report","warnings"}
//	      The session is compacted at once if it is over its threshold
//	      (options.threshold, else the gate's compact threshold).
//
//	POST /v1/sessions/{id}/messages
//	  {"messages": a JSON array of the new messages only (required),
//	   "format": canonical (default), anthropic or openai,
//	   "if_revision": append only at this revision}
//	  200 {"id","revision","appended","action","tokens","compactions",
//	       "updated_at","report": when the gate acted, as for compact,
//	       "warnings"}
//	      action: none, compacted, emergency, pruned or nothing_to_fold.
//	      Appends to one ID are serialized across every server sharing the
//	      store; one that crosses the threshold compacts the session once.
//	      An unknown ID is a 404 (session_not_found): PUT creates sessions.
//	      Tool results may come in a later append than their calls.
//
//	GET /v1/sessions/{id}?output_format=canonical|anthropic|openai
//	  200 {"id","revision","output_format","messages","system","tokens",
//	       "compactions","summary","updated_at","cache"}
//	      messages: the compacted context as a JSON array to send as is
//	      (canonical by default); system: Anthropic's system prompt, which
//	      its messages cannot hold; summary: the latest compaction's.
//	      cache: the prompt cache and cost, from the usage of the assistant
//	      messages appended (each is a model call made at its append):
//	      {"last_request","cache_ttl","cold","cached_tokens","prompt_tokens",
//	       "requests","misses": by reason (cold_start, ttl_expired,
//	       compaction, prefix_changed),"growth": {"gaps","expired","tokens"},
//	       "cost": {"priced","bill","uncompacted_usd": the same calls without
//	       the compactions,"summary_usd","compactions_usd","saved_usd",
//	       "compactions": [{"time","tokens_before","tokens_after","warm",
//	       "summary_usd","rewrite_usd","uncompacted_usd",
//	       "saved_per_request_usd","break_even_requests"}]}}. Kept with the
//	      session in the store: it survives compactions and restarts.
//
//	GET /v1/sessions/{id}/originals
//	  200 {"id","revision","messages"}
//	      messages: canonical, each once: what the session's compactions
//	      folded, each compaction's summary after what it folded, then the
//	      rest of the current context; what compact-host mcp --session
//	      recalls the summaries' [recall:…] markers from and searches. The
//	      ETag names the revision: If-None-Match gets 304 while it holds.
//	      The originals are kept beside the session, up to the store's size
//	      limit of a session, count in the token's quota, and go with it.
//
//	DELETE /v1/sessions/{id}
//	  200 {"id","deleted":true}
//
//	  An ID is 1 to 128 letters, digits, '-', '_', '.' or ':', starting with
//	  a letter or digit. Sessions live in the store (--store): the disk store
//	  by default, Redis to share them between servers.
//
//	  Each token is a tenant: its sessions are reached by it alone, and
//	  another token's ID answers 404 as one never made. A token keeps at
//	  most --tenant-max-sessions sessions of --tenant-max-bytes bytes in
//	  all; a write past that removes the token's own sessions written
//	  longest ago (never another token's), and a session over the bytes
//	  alone is refused (507).
//
//	The session is a JSON object (an Anthropic or OpenAI request, a SWE-agent
//	or mini-swe-agent trajectory), an array of canonical messages
//	({"id","role","content":[blocks]}), or a string holding a JSONL file: a
//	compact-host session log (its compactions are kept and can be undone),
//	canonical messages, or a Claude Code, Codex or Copilot session. Line
//	numbers in errors count from the start of the session value (of the
//	string's content; for an array, line N is element N). Canonical output is
//	a string holding the session log: every message, the summary and the
//	compaction entry, so 'compact-host undo' reverts it.
//
//	Errors: {"error":{"code","message","line"?,"offset"?}} with the status:
//	  400 bad_json          the body is not one JSON object
//	  400 unknown_field     a field the endpoint does not take
//	  400 bad_request       a field missing, of the wrong type or out of range
//	  400 bad_session       the session does not parse; line says where
//	  400 invalid_session   the session breaks the providers' rules (an orphaned
//	                        tool result, a call without a result...)
//	  400 unknown_format    an unknown format, or one that cannot be detected
//	  400 bad_options       options that make no engine (an unknown model
//	                        without context_window, keep_recent_tokens over
//	                        the budget...)
//	  400 unknown_strategy  no plugin provides the strategy
//	  400 unknown_category  no truncator handles the category (/v1/truncate)
//	  401 unauthorized      missing or wrong "Authorization: Bearer <token>"
//	  404 not_found         no such endpoint
//	  404 session_not_found no session has that ID (PUT creates one)
//	  405 method_not_allowed the endpoint takes another method (see Allow)
//	  408 timeout           the body did not arrive within --body-timeout
//	                        (or --request-timeout, when shorter)
//	  409 revision_conflict the session is not at if_revision: read it again
//	                        and retry
//	  413 too_large         the body is over --max-request-bytes, or the
//	                        session over the store's max_session_bytes
//	  500 internal          a bug: the server failed, its result did not
//	                        validate, or its answer could not be encoded
//	                        (then nothing else is sent)
//	  503 busy              no worker came free before the request timeout,
//	                        or the session stayed locked (Retry-After: 1)
//	  503 store_unavailable the session store did not answer; the other
//	                        endpoints work on (Retry-After: 1)
//	  504 timeout           the work outlasted --request-timeout
//	  507 quota_exceeded    the session alone is over the bytes one token
//	                        may keep (--tenant-max-bytes)
package server
