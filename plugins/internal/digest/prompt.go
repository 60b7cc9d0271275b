package digest

// ContentRules is what every summary must keep, written into the model
// prompt of every built-in strategy: the same requirements the offline
// summaries meet.
const ContentRules = `What the summary must keep:
- The request in progress: the latest user request that is not yet done, quoted verbatim and in full, once. An earlier request that was finished or replaced is not the task.
- The next step: what the agent was about to do, from its own latest plan or todo list (the steps in progress and pending), its last stated intention, and the failing tests or errors not yet fixed. Name the command, file or function.
- Per file created, modified or deleted: what changed in it (the functions, types and identifiers added, changed or removed, and the design decision behind the change) and its latest state where known.
- Decisions with their reason; options ruled out, or turned down by the user, labelled "Rejected:" with why. Never list a rejected option as a decision.
- Errors met and how each was resolved, or that it is not resolved yet.
- Constraints the user set: style, scope, things not to do.

Quote verbatim, never paraphrase: the request in progress, file paths, function and type names, commands, error messages, test names, identifiers, URLs. Say each thing once: do not repeat text between sections.`
