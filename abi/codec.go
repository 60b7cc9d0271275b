package abi

import (
	"fmt"
)

// Encode lays out doc as a frame. doc is a pointer to one of the documents
// of this package (Info, SummarizeRequest, SummarizeResponse,
// TruncateRequest, TruncateResponse, CompleteRequest, CompleteResponse,
// CountTokensRequest, CountTokensResponse) or an *Error, which makes an
// error frame.
func Encode(doc any) ([]byte, error) {
	header, blobs := 128, 0
	switch d := doc.(type) {
	case *SummarizeRequest:
		header, blobs = sizeMessages(d.Messages)
	case *CompleteRequest:
		header, blobs = sizeMessages(d.Messages)
	}
	w := &frameWriter{jsonWriter: jsonWriter{b: make([]byte, 0, header)}, blobs: make([][]byte, 0, blobs+2)}
	w.open()
	if e, ok := doc.(*Error); ok {
		w.key("error")
		w.open()
		w.str("code", e.Code)
		w.str("message", e.Message)
		w.close()
	} else {
		w.key("body")
		if err := w.body(doc); err != nil {
			return nil, err
		}
	}
	w.close()
	return w.finish(), nil
}

// MustEncodeError encodes an error frame. Encoding an *Error cannot fail.
func MustEncodeError(e *Error) []byte {
	b, err := Encode(e)
	if err != nil {
		panic(err)
	}
	return b
}

// body writes doc's header object; large fields go to blobs.
func (w *frameWriter) body(doc any) error {
	w.open()
	switch d := doc.(type) {
	case *Info:
		w.int("abi_major", d.ABIMajor)
		w.int("abi_minor", d.ABIMinor)
		w.str("name", d.Name)
		w.strOmit("version", d.Version)
		w.strOmit("description", d.Description)
		w.strs("kinds", d.Kinds)
		w.strsOmit("categories", d.Categories)
	case *SummarizeRequest:
		w.str("kind", d.Kind)
		if err := w.messages(d.Messages); err != nil {
			return err
		}
		w.refStr("previous_summary", d.PreviousSummary)
		w.key("file_ops")
		w.open()
		w.strsOmit("read", d.FileOps.Read)
		w.strsOmit("modified", d.FileOps.Modified)
		w.close()
		w.int("target_tokens", d.TargetTokens)
		w.refStr("focus", d.Focus)
		w.bool("model_available", d.ModelAvailable)
		if len(d.Markers) > 0 {
			w.key("markers")
			w.openArray()
			for _, m := range d.Markers {
				w.open()
				w.str("ref", m.Ref)
				w.str("kind", m.Kind)
				w.strOmit("tool_name", m.ToolName)
				w.intOmit("bytes", m.Bytes)
				w.close()
			}
			w.closeArray()
		}
	case *SummarizeResponse:
		w.refStr("summary", d.Summary)
		w.boolOmit("offline", d.Offline)
	case *TruncateRequest:
		w.str("category", d.Category)
		w.strOmit("tool_name", d.ToolName)
		w.ref("content", d.Content)
		w.int("max_tokens", d.MaxTokens)
	case *TruncateResponse:
		w.ref("content", d.Content)
		w.bool("truncated", d.Truncated)
		w.intOmit("omitted_bytes", d.OmittedBytes)
		w.intOmit("omitted_lines", d.OmittedLines)
	case *CompleteRequest:
		w.refStr("system", d.System)
		if err := w.messages(d.Messages); err != nil {
			return err
		}
		w.intOmit("max_tokens", d.MaxTokens)
	case *CompleteResponse:
		w.refStr("text", d.Text)
		w.key("usage")
		w.usage(d.Usage)
		w.strOmit("model", d.Model)
	case *CountTokensRequest:
		w.refStr("text", d.Text)
	case *CountTokensResponse:
		w.int("tokens", d.Tokens)
	default:
		return fmt.Errorf("abi: cannot encode %T", doc)
	}
	w.close()
	return nil
}

// sizeMessages estimates the header and the number of blobs of a frame
// carrying ms, so that the header of a long conversation is not copied
// over and over as it grows (an estimate short by escapes only grows
// it once more).
func sizeMessages(ms []Message) (header, blobs int) {
	header = 256
	for _, m := range ms {
		header += 48 + len(m.ID) + len(m.Role)
		if m.Usage != nil {
			header += 96
		}
		for _, b := range m.Content {
			header += 64 + len(b.Type) + len(b.ID) + len(b.Name) + len(b.Input) + len(b.ToolUseID) + len(b.MediaType)
			if b.Text != "" {
				blobs++
			}
			if len(b.Data) > 0 {
				blobs++
			}
		}
	}
	return header, blobs
}

func (w *frameWriter) messages(ms []Message) error {
	w.key("messages")
	w.openArray()
	for i, m := range ms {
		w.open()
		w.strOmit("id", m.ID)
		w.str("role", m.Role)
		w.key("content")
		w.openArray()
		for j, b := range m.Content {
			w.open()
			w.str("type", b.Type)
			w.refStr("text", b.Text)
			w.strOmit("id", b.ID)
			w.strOmit("name", b.Name)
			if len(b.Input) > 0 {
				if err := w.raw("input", b.Input); err != nil {
					return fmt.Errorf("abi: encode message %d block %d: %w", i, j, err)
				}
			}
			w.strOmit("tool_use_id", b.ToolUseID)
			w.boolOmit("is_error", b.IsError)
			w.strOmit("media_type", b.MediaType)
			w.ref("data", b.Data)
			w.close()
		}
		w.closeArray()
		w.boolOmit("pinned", m.Pinned)
		w.boolOmit("summary", m.Summary)
		if m.Usage != nil {
			w.key("usage")
			w.usage(*m.Usage)
		}
		w.close()
	}
	w.closeArray()
	return nil
}

func (w *jsonWriter) usage(u Usage) {
	w.open()
	w.int("input_tokens", u.InputTokens)
	w.int("output_tokens", u.OutputTokens)
	w.intOmit("cache_read_tokens", u.CacheReadTokens)
	w.intOmit("cache_write_tokens", u.CacheWriteTokens)
	w.close()
}

// Decode reads a frame into doc, a pointer to one of the documents listed
// at Encode. If the frame is an error frame, Decode returns its *Error.
// Byte-slice fields of doc alias frame, except tool inputs; strings and
// tool inputs are copies, made into a few shared allocations, so one of
// them kept keeps others' bytes alive too. doc is only changed when
// Decode succeeds.
func Decode(frame []byte, doc any) error {
	switch d := doc.(type) {
	case *Info:
		return decodeInto(frame, d)
	case *SummarizeRequest:
		return decodeInto(frame, d)
	case *SummarizeResponse:
		return decodeInto(frame, d)
	case *TruncateRequest:
		return decodeInto(frame, d)
	case *TruncateResponse:
		return decodeInto(frame, d)
	case *CompleteRequest:
		return decodeInto(frame, d)
	case *CompleteResponse:
		return decodeInto(frame, d)
	case *CountTokensRequest:
		return decodeInto(frame, d)
	case *CountTokensResponse:
		return decodeInto(frame, d)
	}
	return fmt.Errorf("abi: cannot decode into %T", doc)
}

// decodeInto decodes into d, putting back what d held if that fails. The
// copy lives on the stack, where a deferred store of a decoded value would
// have cost allocations, which inside a Go wasm plugin are dear.
func decodeInto[T any](frame []byte, d *T) error {
	old := *d
	if err := decode(frame, d); err != nil {
		*d = old
		return err
	}
	return nil
}

func decode(frame []byte, doc any) error {
	var f frameReader
	if err := readFrame(frame, &f); err != nil {
		return err
	}
	r := docReader{jsonReader: jsonReader{b: f.header}, frame: &f}
	r.text.left = len(frame)
	switch doc.(type) {
	case *TruncateRequest, *TruncateResponse, *Info, *CountTokensResponse:
		r.text.left = len(f.header) // their blobs are byte slices, or none
	}
	var (
		errDoc  *Error
		hasBody bool
	)
	r.object("header", func(key []byte) {
		switch string(key) {
		case "body":
			if r.null() {
				return
			}
			hasBody = true
			r.body(doc)
		case "error":
			if r.null() {
				return
			}
			errDoc = &Error{}
			r.object("error", func(key []byte) {
				switch string(key) {
				case "code":
					errDoc.Code = r.str("code")
				case "message":
					errDoc.Message = r.str("message")
				default:
					r.skip()
				}
			})
		default:
			r.skip()
		}
	})
	if r.ws(); r.err == nil && r.i != len(r.b) {
		r.fail("data after the header object")
	}
	switch {
	case r.err != nil:
		return fmt.Errorf("%w: header: %v", ErrMalformed, r.err)
	case errDoc != nil:
		if errDoc.Code == "" {
			errDoc.Code = CodeInternal
		}
		return errDoc
	case !hasBody:
		return fmt.Errorf("%w: header has neither body nor error", ErrMalformed)
	}
	return nil
}

// docReader reads a header and resolves its blob references.
type docReader struct {
	jsonReader
	frame *frameReader
	// blocks is a chunk of content blocks that the messages' Content
	// slices share, so a message costs no allocation of its own.
	blocks []Block
}

func (r *docReader) blob(what string) []byte {
	ref := r.ref(what)
	if r.err != nil {
		return nil
	}
	b, err := r.frame.blob(ref)
	if err != nil {
		r.fail("%s: %v", what, err)
	}
	return b
}

func (r *docReader) blobStr(what string) string { return r.text.str(r.blob(what)) }

// body reads the document doc points to into it.
func (r *docReader) body(doc any) {
	switch d := doc.(type) {
	case *Info:
		*d = Info{}
		r.object("info", func(key []byte) {
			switch string(key) {
			case "abi_major":
				d.ABIMajor = r.int("abi_major")
			case "abi_minor":
				d.ABIMinor = r.int("abi_minor")
			case "name":
				d.Name = r.str("name")
			case "version":
				d.Version = r.str("version")
			case "description":
				d.Description = r.str("description")
			case "kinds":
				d.Kinds = r.strs("kinds")
			case "categories":
				d.Categories = r.strs("categories")
			default:
				r.skip()
			}
		})
	case *SummarizeRequest:
		*d = SummarizeRequest{}
		r.object("summarize request", func(key []byte) {
			switch string(key) {
			case "kind":
				d.Kind = r.str("kind")
			case "messages":
				d.Messages = r.messages()
			case "previous_summary":
				d.PreviousSummary = r.blobStr("previous_summary")
			case "file_ops":
				r.object("file_ops", func(key []byte) {
					switch string(key) {
					case "read":
						d.FileOps.Read = r.strs("read")
					case "modified":
						d.FileOps.Modified = r.strs("modified")
					default:
						r.skip()
					}
				})
			case "target_tokens":
				d.TargetTokens = r.int("target_tokens")
			case "focus":
				d.Focus = r.blobStr("focus")
			case "model_available":
				d.ModelAvailable = r.bool("model_available")
			case "markers":
				r.array("markers", func() {
					var m Marker
					r.object("marker", func(key []byte) {
						switch string(key) {
						case "ref":
							m.Ref = r.str("ref")
						case "kind":
							m.Kind = r.str("kind")
						case "tool_name":
							m.ToolName = r.str("tool_name")
						case "bytes":
							m.Bytes = r.int("bytes")
						default:
							r.skip()
						}
					})
					d.Markers = append(d.Markers, m)
				})
			default:
				r.skip()
			}
		})
	case *SummarizeResponse:
		*d = SummarizeResponse{}
		r.object("summarize response", func(key []byte) {
			switch string(key) {
			case "summary":
				d.Summary = r.blobStr("summary")
			case "offline":
				d.Offline = r.bool("offline")
			default:
				r.skip()
			}
		})
	case *TruncateRequest:
		*d = TruncateRequest{}
		r.object("truncate request", func(key []byte) {
			switch string(key) {
			case "category":
				d.Category = r.str("category")
			case "tool_name":
				d.ToolName = r.str("tool_name")
			case "content":
				d.Content = r.blob("content")
			case "max_tokens":
				d.MaxTokens = r.int("max_tokens")
			default:
				r.skip()
			}
		})
	case *TruncateResponse:
		*d = TruncateResponse{}
		r.object("truncate response", func(key []byte) {
			switch string(key) {
			case "content":
				d.Content = r.blob("content")
			case "truncated":
				d.Truncated = r.bool("truncated")
			case "omitted_bytes":
				d.OmittedBytes = r.int("omitted_bytes")
			case "omitted_lines":
				d.OmittedLines = r.int("omitted_lines")
			default:
				r.skip()
			}
		})
	case *CompleteRequest:
		*d = CompleteRequest{}
		r.object("complete request", func(key []byte) {
			switch string(key) {
			case "system":
				d.System = r.blobStr("system")
			case "messages":
				d.Messages = r.messages()
			case "max_tokens":
				d.MaxTokens = r.int("max_tokens")
			default:
				r.skip()
			}
		})
	case *CompleteResponse:
		*d = CompleteResponse{}
		r.object("complete response", func(key []byte) {
			switch string(key) {
			case "text":
				d.Text = r.blobStr("text")
			case "usage":
				d.Usage = r.usage()
			case "model":
				d.Model = r.str("model")
			default:
				r.skip()
			}
		})
	case *CountTokensRequest:
		*d = CountTokensRequest{}
		r.object("count tokens request", func(key []byte) {
			switch string(key) {
			case "text":
				d.Text = r.blobStr("text")
			default:
				r.skip()
			}
		})
	case *CountTokensResponse:
		*d = CountTokensResponse{}
		r.object("count tokens response", func(key []byte) {
			switch string(key) {
			case "tokens":
				d.Tokens = r.int("tokens")
			default:
				r.skip()
			}
		})
	default:
		panic(fmt.Sprintf("abi: no decoder for %T", doc)) // Decode checked the type
	}
}

func (r *docReader) messages() []Message {
	// Most messages carry a blob (a text, a tool result), and none takes
	// fewer than 28 bytes of header: sizing the list from both spares
	// copying it as it grows, pointers and all. The bound keeps a frame
	// of many empty blobs from reserving more than a few megabytes.
	out := make([]Message, 0, min(len(r.frame.blobs), len(r.b)/28, 1<<16))
	r.array("messages", func() {
		var m Message
		r.object("message", func(key []byte) {
			switch string(key) {
			case "id":
				m.ID = r.str("id")
			case "role":
				m.Role = r.str("role")
			case "content":
				m.Content = r.content()
			case "pinned":
				m.Pinned = r.bool("pinned")
			case "summary":
				m.Summary = r.bool("summary")
			case "usage":
				m.Usage = nil
				if !r.null() {
					u := r.usage()
					m.Usage = &u
				}
			default:
				r.skip()
			}
		})
		out = append(out, m)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// content reads a message's blocks into the shared chunk and returns
// them capped, so appending to one message's blocks cannot overwrite the
// next message's. A full chunk is left to the messages that use it and a
// twice larger one started, which takes the blocks of this message along.
func (r *docReader) content() []Block {
	start := len(r.blocks)
	r.array("content", func() {
		if len(r.blocks) == cap(r.blocks) {
			chunk := make([]Block, 0, max(16, 2*cap(r.blocks), 2*(len(r.blocks)-start)))
			r.blocks = append(chunk, r.blocks[start:]...)
			start = 0
		}
		r.blocks = r.blocks[:len(r.blocks)+1]
		r.block(&r.blocks[len(r.blocks)-1])
	})
	if len(r.blocks) == start {
		return nil
	}
	return r.blocks[start:len(r.blocks):len(r.blocks)]
}

// block reads a block into b, which is zero.
func (r *docReader) block(b *Block) {
	r.object("block", func(key []byte) {
		switch string(key) {
		case "type":
			b.Type = r.str("type")
		case "text":
			b.Text = r.blobStr("text")
		case "id":
			b.ID = r.str("id")
		case "name":
			b.Name = r.str("name")
		case "input":
			b.Input = r.raw()
		case "tool_use_id":
			b.ToolUseID = r.str("tool_use_id")
		case "is_error":
			b.IsError = r.bool("is_error")
		case "media_type":
			b.MediaType = r.str("media_type")
		case "data":
			b.Data = r.blob("data")
		default:
			r.skip()
		}
	})
}

func (r *jsonReader) usage() Usage {
	var u Usage
	r.object("usage", func(key []byte) {
		switch string(key) {
		case "input_tokens":
			u.InputTokens = r.int("input_tokens")
		case "output_tokens":
			u.OutputTokens = r.int("output_tokens")
		case "cache_read_tokens":
			u.CacheReadTokens = r.int("cache_read_tokens")
		case "cache_write_tokens":
			u.CacheWriteTokens = r.int("cache_write_tokens")
		default:
			r.skip()
		}
	})
	return u
}
