package client

import "github.com/sema-agent/sema/api"

// Sentinels of the lane's error codes, for errors.Is: an *Error matches
// the sentinel of its Code whatever its status and message, e.g.
//
//	if errors.Is(err, client.ErrSessionDeviceMismatch) { … rebind … }
//
// errors.As to *Error still gives the lane's message (for a mismatch it
// names the device the session is bound to).
var (
	ErrForbidden             = &Error{Code: api.CodeForbidden}
	ErrDeviceNotFound        = &Error{Code: api.CodeDeviceNotFound}
	ErrDeviceRevoked         = &Error{Code: api.CodeDeviceRevoked}
	ErrSessionDeviceMismatch = &Error{Code: api.CodeSessionDeviceMismatch}
	ErrSessionNotFound       = &Error{Code: api.CodeSessionNotFound}
	ErrAPIKeyNotFound        = &Error{Code: api.CodeAPIKeyNotFound}
	ErrLastAdminKey          = &Error{Code: api.CodeLastAdminKey}
)

// Is matches a sentinel *Error (no status, no message) by its code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == 0 && t.Message == "" && t.Code != "" && t.Code == e.Code
}
