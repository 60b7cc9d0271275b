package abi

import (
	"errors"
	"fmt"
)

// Error codes a plugin or the host returns inside an error frame.
const (
	CodeInvalidRequest = "invalid_request" // the request could not be decoded or made no sense
	CodeUnsupported    = "unsupported"     // the plugin does not implement the operation or category
	CodeNoModel        = "no_model"        // OpComplete was called but no model is configured
	CodeModel          = "model_error"     // the model call failed
	CodeDeadline       = "deadline"        // the call's deadline passed
	CodeTooLarge       = "too_large"       // a document is over a size limit
	CodeInternal       = "internal"        // anything else
)

// ErrMalformed is returned (wrapped) when a frame or document cannot be decoded.
var ErrMalformed = errors.New("abi: malformed frame")

// Error is an error carried across the ABI in an error frame.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error, wrapping unknown errors as CodeInternal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
