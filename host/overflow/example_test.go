package overflow_test

import (
	"fmt"

	"github.com/compact-host/compact-host/host/overflow"
)

func ExampleClassify() {
	body := []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`)
	r := overflow.Classify(400, body)
	fmt.Println(r.Overflow, r.Provider, r.ContextWindow, r.Requested)

	throttled := overflow.Classify(429, []byte(`{"message":"Too many tokens, please wait before trying again."}`))
	fmt.Println(throttled.Overflow, throttled.Reason)
	// Output:
	// true anthropic 200000 208310
	// false rate limit or throttling, not an overflow
}

func ExampleSilent() {
	// The provider reported 212,000 prompt tokens for a model the catalog
	// gives a 200,000-token window.
	fmt.Println(overflow.Silent(212000, 200000))
	// Output: true
}
