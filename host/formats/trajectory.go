package formats

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// miniMessage is a mini-swe-agent message: a Chat Completions message plus
// an "extra" object holding, among others, the raw model response.
type miniMessage struct {
	oaMessage
	Extra borrowedRaw `json:"extra"` // read before the document is dropped
}

// readMiniSWEAgent reads a mini-swe-agent trajectory: OpenAI-style messages
// with tool_calls and role "tool" (format 1.1), or text only (format 1). The
// usage of each model response (extra.response.usage) becomes the Usage of
// its assistant message. The final "exit" message, written by the agent
// after the run and never sent to the model, is skipped; so is its
// counterpart in the first format, a last user message holding the
// submission (see miniSubmission).
func readMiniSWEAgent(r *bufio.Reader, s *Session) error {
	var doc struct {
		Messages []miniMessage `json:"messages"`
	}
	if _, err := readDoc(r, MiniSWEAgent, &doc); err != nil {
		return err
	}
	if n := len(doc.Messages); n >= 2 && miniSubmission(&doc.Messages[n-2].oaMessage, &doc.Messages[n-1].oaMessage) {
		doc.Messages = doc.Messages[:n-1]
		s.Skipped["submission"]++
	}
	in := make([]oaMessage, len(doc.Messages))
	for i, m := range doc.Messages {
		in[i] = m.oaMessage
		if m.Role == "assistant" {
			in[i].Usage = miniUsage(m.Extra)
		}
	}
	msgs, err := oaMessages(in, func(i int) string { return MiniSWEAgent + "-" + strconv.Itoa(i) }, s.Skipped, false)
	if err != nil {
		return &ParseError{Offset: -1, Format: MiniSWEAgent, Reason: err.Error()}
	}
	finish(s, msgs, MiniSWEAgent)
	pinLeadingSystem(s.Messages)
	return nil
}

// miniSubmitMarkers are the first lines of the output that ends a
// mini-swe-agent run: the command that prints one submits what follows it.
var miniSubmitMarkers = []string{"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT"}

// miniSubmission reports whether last, the last message of a trajectory
// after prev, is the submission of a first-format (text action) run: the
// output of prev's command that printed a submit marker, less the marker,
// which mini-swe-agent records as a user message when the run ends. The
// model never saw it, and it is the agent's own output, not a request.
// Observations that were sent open with "<returncode>"; a submission does
// not.
func miniSubmission(prev, last *oaMessage) bool {
	if prev.Role != "assistant" || last.Role != "user" || len(prev.ToolCalls) > 0 {
		return false
	}
	var action, out string
	if decodeChecked(prev.Content, &action) != nil || decodeChecked(last.Content, &out) != nil {
		return false
	}
	if strings.HasPrefix(strings.TrimSpace(out), "<returncode>") {
		return false
	}
	// The marker is in the command, the last fenced block of the reply.
	open := strings.LastIndex(action, "```")
	if open < 0 {
		return false
	}
	open = strings.LastIndex(action[:open], "```")
	if open < 0 {
		return false
	}
	command := action[open:]
	for _, m := range miniSubmitMarkers {
		if strings.Contains(command, m) {
			return true
		}
	}
	return false
}

// miniUsage extracts extra.response.usage; anything unexpected there means
// no usage rather than an error, as the extra object is free-form.
func miniUsage(extra []byte) *abi.Usage {
	if len(bytes.TrimSpace(extra)) == 0 {
		return nil
	}
	var e struct {
		Response struct {
			Usage *oaUsage `json:"usage"`
		} `json:"response"`
	}
	if decodeChecked(extra, &e) != nil || e.Response.Usage == nil {
		return nil
	}
	return e.Response.Usage.abi()
}

// sweMessage is an entry of a SWE-agent trajectory's history.
type sweMessage struct {
	oaMessage
	Agent       string   `json:"agent"`
	ToolCallIDs []string `json:"tool_call_ids"`
}

// readSWEAgent reads a SWE-agent trajectory from its "history", the messages
// as the model saw them. In the classic form the action sits in the
// assistant's text and its observation is the next user message; those stay
// text. In the function-calling form (SWE-agent 1.x) assistant tool_calls and
// role "tool" observations (tool_call_ids) become tool calls and results.
// Messages of agents other than the primary one are skipped; the
// "trajectory" steps repeat the history and are not read.
func readSWEAgent(r *bufio.Reader, s *Session) error {
	var doc struct {
		History []sweMessage `json:"history"`
	}
	if _, err := readDoc(r, SWEAgent, &doc); err != nil {
		return err
	}
	in := make([]oaMessage, 0, len(doc.History))
	ids := make([]int, 0, len(doc.History))
	for i, m := range doc.History {
		if m.Agent != "" && m.Agent != "primary" && m.Agent != "main" {
			s.Skipped["history/agent "+m.Agent]++
			continue
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			if len(m.ToolCallIDs) == 0 {
				m.Role = "user"
			} else {
				m.ToolCallID = m.ToolCallIDs[0]
			}
		}
		in = append(in, m.oaMessage)
		ids = append(ids, i)
		// Further calls answered by the same observation get an empty result.
		for _, extra := range m.ToolCallIDs[min(1, len(m.ToolCallIDs)):] {
			if m.Role != "tool" {
				break
			}
			in = append(in, oaMessage{Role: "tool", ToolCallID: extra})
			ids = append(ids, i)
		}
	}
	msgs, err := oaMessages(in, func(k int) string { return SWEAgent + "-" + strconv.Itoa(ids[k]) }, s.Skipped, false)
	if err != nil {
		return &ParseError{Offset: -1, Format: SWEAgent, Reason: err.Error()}
	}
	finish(s, msgs, SWEAgent)
	pinLeadingSystem(s.Messages)
	return nil
}
