package overflow

import (
	"errors"
	"testing"
)

func FuzzClassify(f *testing.F) {
	seeds := []struct {
		status int
		body   string
	}{
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`},
		{400, `{"error":"{\"error\":{\"code\":400,\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":8889,\"n_ctx\":4096}}"}`},
		{400, `[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]`},
		{413, ``},
		{429, `{"message":"Too many tokens, please wait before trying again."}`},
		{500, `{"error":{"n_ctx":-1,"n_prompt_tokens":1e400}}`},
		{0, `{"error":"\"{\\\"error\\\":\\\"[[[[[[\\\"}\""}`},
		{400, `maximum context length is 99999999999999999999999 tokens`},
	}
	for _, s := range seeds {
		f.Add(s.status, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r := Classify(status, body)
		if r.Overflow && r.Reason == "" {
			t.Errorf("overflow without a reason: %+v", r)
		}
		if status == 429 && r.Overflow {
			t.Errorf("a 429 classified as overflow: %+v", r)
		}
		if r.ContextWindow < 0 || r.Requested < 0 {
			t.Errorf("negative counts: %+v", r)
		}
		_ = FromError(errors.New(string(body)))
	})
}
