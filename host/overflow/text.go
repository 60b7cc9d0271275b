package overflow

import (
	"regexp"
	"strconv"
	"strings"
)

// statusRes find an HTTP status in an error's text, in the forms SDKs and
// wrappers print: "status 400", "status code: 413", "Error code: 400",
// "HTTP 413", `POST "https://...": 400 Bad Request`, "400 {...}" at the
// start, "400 status code (no body)".
var statusRes = []*regexp.Regexp{
	re(`(?:status(?: ?code)?|error code|http)[ :=]*([1-5]\d\d)\b`),
	re(`\b([45]\d\d) (?:bad request|request entity too large|payload too large|content too large|too many requests|internal server error|bad gateway|service unavailable|gateway timeout|status code)`),
	re(`^\s*(?:error:\s*)?([45]\d\d)\b`),
}

func statusFromText(lower string) int {
	for _, r := range statusRes {
		if m := r.FindStringSubmatch(lower); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

// fromText classifies an error known only by its text. JSON embedded in
// the text is parsed like a body; the whole text is matched as well, so a
// prefix such as "ThrottlingException:" still counts.
func fromText(s string) Result {
	lower := strings.ToLower(s)
	status := statusFromText(lower)
	var d details
	if i, j := strings.IndexAny(s, "{["), strings.LastIndexAny(s, "}]"); i >= 0 && j > i {
		d = parseBody([]byte(s[i : j+1]))
	}
	d.messages = append(d.messages, s)
	empty := strings.Contains(lower, "(no body)")
	return decide(status, d, empty)
}
