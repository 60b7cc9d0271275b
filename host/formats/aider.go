package formats

import (
	"bufio"
	"io"
	"strconv"
	"strings"

	"github.com/compact-host/compact-host/abi"
)

// aiderStart opens each run of aider in its chat history.
const aiderStart = "# aider chat started at "

// readAider reads an Aider chat history (.aider.chat.history.md), the
// Markdown log aider appends to: "# aider chat started at" opens each run,
// "#### " lines are what the user typed, "> " lines are aider's own console
// output (never sent to the model) and the other lines are the model's
// answers, SEARCH/REPLACE blocks included, kept as text. Consecutive
// "#### " lines are one user message (a prompt); the echo of an answered question
// (a line with "(Y)es/(N)o") is console output. Every run is read, in
// order, as one conversation. A prompt that is an in-chat command
// (/undo, /add...) was not sent to the model and is skipped, except the
// text of /ask, /code, /architect and /context, which is. Skipped counts the runs ("aider chat
// started") and the console lines, "Applied edit to" lines apart.
func readAider(r *bufio.Reader, s *Session) error {
	data, err := io.ReadAll(io.LimitReader(r, maxDocSize+1))
	if err != nil {
		return &ParseError{Offset: -1, Format: Aider, Reason: err.Error(), Err: err}
	}
	if len(data) > maxDocSize {
		return &ParseError{Offset: maxDocSize, Format: Aider, Reason: "document larger than 1 GiB"}
	}
	// Invalid UTF-8 becomes U+FFFD, as the JSON readers decode it.
	text := strings.ToValidUTF8(strings.TrimPrefix(string(data), "\xef\xbb\xbf"), "\uFFFD")
	if !strings.Contains(text, aiderStart) && !strings.Contains(text, "\n#### ") && !strings.HasPrefix(text, "#### ") {
		return &ParseError{Line: 1, Offset: 0, Format: Aider, Reason: `no "# aider chat started at" line and no "#### " prompt: not an Aider chat history`}
	}
	var msgs []abi.Message
	var cur []string // lines of the message being read
	role, startLine := "", 0
	flush := func() {
		body := strings.Trim(strings.Join(cur, "\n"), "\n")
		if role != "" && strings.TrimSpace(body) != "" {
			msgs = append(msgs, abi.Message{ID: Aider + "-" + strconv.Itoa(startLine), Role: role, Content: []abi.Block{{Type: abi.BlockText, Text: body}}})
		}
		cur, role = nil, ""
	}
	open := func(r string, line int) {
		if role != r {
			flush()
			role, startLine = r, line
		}
	}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case strings.HasPrefix(line, aiderStart):
			flush()
			s.Skipped["aider chat started"]++
		case line == "####" || strings.HasPrefix(line, "#### "):
			prompt := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(line, "####"), " "), "  ")
			if strings.Contains(prompt, "(Y)es/(N)o") {
				s.Skipped["console"]++
				continue
			}
			if role != abi.RoleUser {
				if cmd, args, ok := aiderCommand(prompt); ok {
					if args == "" {
						s.Skipped["command/"+cmd]++
						continue
					}
					prompt = args
				}
			}
			open(abi.RoleUser, n+1)
			cur = append(cur, prompt)
		case line == ">" || strings.HasPrefix(line, "> "):
			flush()
			if strings.HasPrefix(line, "> Applied edit to ") {
				s.Skipped["console/applied edit"]++
			} else {
				s.Skipped["console"]++
			}
		default:
			if role != abi.RoleAssistant && strings.TrimSpace(line) == "" {
				flush() // the blank line after a prompt or console output
				continue
			}
			open(abi.RoleAssistant, n+1)
			cur = append(cur, line)
		}
	}
	flush()
	finish(s, msgs, Aider)
	return nil
}

// aiderCommand splits an in-chat command ("/add x") into its name and
// arguments; for the commands that send their arguments to the model as
// the prompt, args is that prompt, for the others "".
func aiderCommand(prompt string) (cmd, args string, ok bool) {
	if !strings.HasPrefix(prompt, "/") {
		return "", "", false
	}
	cmd, args, _ = strings.Cut(prompt[1:], " ")
	if cmd == "" || strings.ContainsAny(cmd, "/\\.") {
		return "", "", false // a path, not a command
	}
	switch cmd {
	case "ask", "code", "architect", "context":
		return cmd, strings.TrimSpace(args), true
	}
	return cmd, "", true
}
