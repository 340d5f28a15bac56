package nexting

import (
	"errors"
	"fmt"
)

// Code is a wire error code: the closed set of the short spec §5. The codec
// produces four of them (bad_message, message_too_large,
// unsupported_version, unsupported_profile); the other three belong to the
// approval state machines.
type Code string

const (
	// CodeBadMessage: malformed input — bad JSON or UTF-8, a duplicate or
	// missing field, a value out of bounds, an unknown message type.
	CodeBadMessage Code = "bad_message"
	// CodeMessageTooLarge: a frame over the (negotiated) frame limit.
	CodeMessageTooLarge Code = "message_too_large"
	// CodeUnsupportedVersion: "v" is a canonical unsigned integer other than 1.
	CodeUnsupportedVersion Code = "unsupported_version"
	// CodeUnsupportedProfile: a known message of a profile that was not
	// negotiated (or Device Info without approval/1).
	CodeUnsupportedProfile Code = "unsupported_profile"
	// CodeUnknownRequest: an id that names no current request.
	CodeUnknownRequest Code = "unknown_request"
	// CodeNotAuthorized: the peer is not authorized for this traffic.
	CodeNotAuthorized Code = "not_authorized"
	// CodeBusy: another answer attempt is in flight.
	CodeBusy Code = "busy"
)

// Codes lists every member of the error code set, in spec order.
func Codes() []Code {
	return []Code{CodeBadMessage, CodeMessageTooLarge, CodeUnsupportedVersion,
		CodeUnsupportedProfile, CodeUnknownRequest, CodeNotAuthorized, CodeBusy}
}

// Valid reports whether c is a member of the set.
func (c Code) Valid() bool {
	switch c {
	case CodeBadMessage, CodeMessageTooLarge, CodeUnsupportedVersion,
		CodeUnsupportedProfile, CodeUnknownRequest, CodeNotAuthorized, CodeBusy:
		return true
	}
	return false
}

// Error is input refused by the framer, the decoder, Device Info parsing or
// an encoder: exactly one Code, the field at fault when there is one, and
// what was wrong. It never quotes the input's content (a field path holds
// only names this package knows).
type Error struct {
	Code   Code
	Field  string // e.g. "agents[2].slot"; "" for the whole input
	Detail string

	// Type is the refused message's "t" when it named a known type ("" for
	// unknown types and for framing errors). Reply uses it to never answer
	// an error with an error.
	Type Type
	// ID is the refused message's "id" when it was a valid request id.
	ID string
	// Size is how many bytes of the refused input were received, its LF
	// included when one was seen; 0 for errors raised by an encoder.
	Size int
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("nexting: %s: %s", e.Code, e.Detail)
	}
	return fmt.Sprintf("nexting: %s: %s: %s", e.Code, e.Field, e.Detail)
}

// CodeOf returns the Code of an *Error in err's chain, or "" when there is
// none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func badMessage(field, detail string) *Error {
	return &Error{Code: CodeBadMessage, Field: field, Detail: detail}
}

func tooLarge(size, max int) *Error {
	return &Error{Code: CodeMessageTooLarge, Detail: fmt.Sprintf("frame exceeds %d bytes including its LF", max), Size: size}
}
