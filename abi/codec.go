package abi

import (
	"encoding/json"
	"fmt"
)

// Encode lays out doc as a frame. doc is a pointer to one of the documents
// of this package (Info, SummarizeRequest, SummarizeResponse,
// TruncateRequest, TruncateResponse, CompleteRequest, CompleteResponse,
// CountTokensRequest, CountTokensResponse) or an *Error, which makes an
// error frame.
func Encode(doc any) ([]byte, error) {
	w := &frameWriter{}
	var body any
	switch d := doc.(type) {
	case *Error:
		return w.finish(envelope{Error: d})
	case *Info:
		body = d
	case *SummarizeRequest:
		body = wireSummarizeRequest{
			Kind: d.Kind, Messages: w.messages(d.Messages), PreviousSummary: w.str(d.PreviousSummary),
			FileOps: d.FileOps, TargetTokens: d.TargetTokens, Focus: w.str(d.Focus), ModelAvailable: d.ModelAvailable,
		}
	case *SummarizeResponse:
		body = wireSummarizeResponse{Summary: w.str(d.Summary), Offline: d.Offline}
	case *TruncateRequest:
		body = wireTruncateRequest{Category: d.Category, ToolName: d.ToolName, Content: w.blob(d.Content), MaxTokens: d.MaxTokens}
	case *TruncateResponse:
		body = wireTruncateResponse{Content: w.blob(d.Content), Truncated: d.Truncated, OmittedBytes: d.OmittedBytes, OmittedLines: d.OmittedLines}
	case *CompleteRequest:
		body = wireCompleteRequest{System: w.str(d.System), Messages: w.messages(d.Messages), MaxTokens: d.MaxTokens}
	case *CompleteResponse:
		body = wireCompleteResponse{Text: w.str(d.Text), Usage: d.Usage, Model: d.Model}
	case *CountTokensRequest:
		body = wireCountTokensRequest{Text: w.str(d.Text)}
	case *CountTokensResponse:
		body = d
	default:
		return nil, fmt.Errorf("abi: cannot encode %T", doc)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("abi: encode %T: %w", doc, err)
	}
	return w.finish(envelope{Body: raw})
}

// MustEncodeError encodes an error frame. Encoding an *Error cannot fail.
func MustEncodeError(e *Error) []byte {
	b, err := Encode(e)
	if err != nil {
		panic(err)
	}
	return b
}

// Decode reads a frame into doc, a pointer to one of the documents listed
// at Encode. If the frame is an error frame, Decode returns its *Error.
// Byte-slice fields of doc alias frame; strings are copies.
func Decode(frame []byte, doc any) error {
	r, err := readFrame(frame)
	if err != nil {
		return err
	}
	var env envelope
	if err := json.Unmarshal(r.header, &env); err != nil {
		return fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if env.Error != nil {
		if env.Error.Code == "" {
			env.Error.Code = CodeInternal
		}
		return env.Error
	}
	if len(env.Body) == 0 {
		return fmt.Errorf("%w: header has neither body nor error", ErrMalformed)
	}
	unmarshal := func(v any) error {
		if err := json.Unmarshal(env.Body, v); err != nil {
			return fmt.Errorf("%w: %T: %v", ErrMalformed, doc, err)
		}
		return nil
	}
	var errs blobErrors
	switch d := doc.(type) {
	case *Info:
		if err := unmarshal(d); err != nil {
			return err
		}
	case *CountTokensResponse:
		if err := unmarshal(d); err != nil {
			return err
		}
	case *SummarizeRequest:
		var w wireSummarizeRequest
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = SummarizeRequest{
			Kind: w.Kind, Messages: errs.messages(r, w.Messages), PreviousSummary: errs.str(r, w.PreviousSummary),
			FileOps: w.FileOps, TargetTokens: w.TargetTokens, Focus: errs.str(r, w.Focus), ModelAvailable: w.ModelAvailable,
		}
	case *SummarizeResponse:
		var w wireSummarizeResponse
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = SummarizeResponse{Summary: errs.str(r, w.Summary), Offline: w.Offline}
	case *TruncateRequest:
		var w wireTruncateRequest
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = TruncateRequest{Category: w.Category, ToolName: w.ToolName, Content: errs.blob(r, w.Content), MaxTokens: w.MaxTokens}
	case *TruncateResponse:
		var w wireTruncateResponse
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = TruncateResponse{Content: errs.blob(r, w.Content), Truncated: w.Truncated, OmittedBytes: w.OmittedBytes, OmittedLines: w.OmittedLines}
	case *CompleteRequest:
		var w wireCompleteRequest
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = CompleteRequest{System: errs.str(r, w.System), Messages: errs.messages(r, w.Messages), MaxTokens: w.MaxTokens}
	case *CompleteResponse:
		var w wireCompleteResponse
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = CompleteResponse{Text: errs.str(r, w.Text), Usage: w.Usage, Model: w.Model}
	case *CountTokensRequest:
		var w wireCountTokensRequest
		if err := unmarshal(&w); err != nil {
			return err
		}
		*d = CountTokensRequest{Text: errs.str(r, w.Text)}
	default:
		return fmt.Errorf("abi: cannot decode into %T", doc)
	}
	return errs.err
}

type envelope struct {
	Body  json.RawMessage `json:"body,omitempty"`
	Error *Error          `json:"error,omitempty"`
}

// Wire forms: the documents with every large field replaced by a blob index.

type wireBlock struct {
	Type      string          `json:"type"`
	Text      *int            `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Data      *int            `json:"data,omitempty"`
}

type wireMessage struct {
	ID      string      `json:"id,omitempty"`
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
	Pinned  bool        `json:"pinned,omitempty"`
	Summary bool        `json:"summary,omitempty"`
	Usage   *Usage      `json:"usage,omitempty"`
}

type wireSummarizeRequest struct {
	Kind            string        `json:"kind"`
	Messages        []wireMessage `json:"messages"`
	PreviousSummary *int          `json:"previous_summary,omitempty"`
	FileOps         FileOps       `json:"file_ops"`
	TargetTokens    int           `json:"target_tokens"`
	Focus           *int          `json:"focus,omitempty"`
	ModelAvailable  bool          `json:"model_available"`
}

type wireSummarizeResponse struct {
	Summary *int `json:"summary,omitempty"`
	Offline bool `json:"offline,omitempty"`
}

type wireTruncateRequest struct {
	Category  string `json:"category"`
	ToolName  string `json:"tool_name,omitempty"`
	Content   *int   `json:"content,omitempty"`
	MaxTokens int    `json:"max_tokens"`
}

type wireTruncateResponse struct {
	Content      *int `json:"content,omitempty"`
	Truncated    bool `json:"truncated"`
	OmittedBytes int  `json:"omitted_bytes,omitempty"`
	OmittedLines int  `json:"omitted_lines,omitempty"`
}

type wireCompleteRequest struct {
	System    *int          `json:"system,omitempty"`
	Messages  []wireMessage `json:"messages"`
	MaxTokens int           `json:"max_tokens,omitempty"`
}

type wireCompleteResponse struct {
	Text  *int   `json:"text,omitempty"`
	Usage Usage  `json:"usage"`
	Model string `json:"model,omitempty"`
}

type wireCountTokensRequest struct {
	Text *int `json:"text,omitempty"`
}

func (w *frameWriter) messages(ms []Message) []wireMessage {
	out := make([]wireMessage, len(ms))
	for i, m := range ms {
		wm := wireMessage{ID: m.ID, Role: m.Role, Pinned: m.Pinned, Summary: m.Summary, Usage: m.Usage, Content: make([]wireBlock, len(m.Content))}
		for j, b := range m.Content {
			wm.Content[j] = wireBlock{
				Type: b.Type, Text: w.str(b.Text), ID: b.ID, Name: b.Name, Input: b.Input,
				ToolUseID: b.ToolUseID, IsError: b.IsError, MediaType: b.MediaType, Data: w.blob(b.Data),
			}
		}
		out[i] = wm
	}
	return out
}

// blobErrors keeps the first bad blob reference met while resolving a document.
type blobErrors struct{ err error }

func (e *blobErrors) blob(r *frameReader, ref *int) []byte {
	b, err := r.blob(ref)
	if err != nil && e.err == nil {
		e.err = err
	}
	return b
}

func (e *blobErrors) str(r *frameReader, ref *int) string { return string(e.blob(r, ref)) }

func (e *blobErrors) messages(r *frameReader, ws []wireMessage) []Message {
	if ws == nil {
		return nil
	}
	out := make([]Message, len(ws))
	for i, wm := range ws {
		m := Message{ID: wm.ID, Role: wm.Role, Pinned: wm.Pinned, Summary: wm.Summary, Usage: wm.Usage, Content: make([]Block, len(wm.Content))}
		for j, wb := range wm.Content {
			m.Content[j] = Block{
				Type: wb.Type, Text: e.str(r, wb.Text), ID: wb.ID, Name: wb.Name, Input: wb.Input,
				ToolUseID: wb.ToolUseID, IsError: wb.IsError, MediaType: wb.MediaType, Data: e.blob(r, wb.Data),
			}
		}
		out[i] = m
	}
	return out
}
