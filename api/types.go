package api

import "time"

import "github.com/sema-agent/sema/protocol"

// The JSON bodies of the management plane and the instruction endpoints
// (docs/api.md). The lane's handlers marshal exactly these; clients decode
// them. Field order and tags are the wire: change neither.

// HeaderHalfDuplex, set to "1" on a streamed write (POST
// /v1/devices/{id}/writes), asks the lane to hold its answer — the accepted
// line and everything after it — until it has read the whole body, or until
// the instruction settled. It is for a caller behind a proxy that stops
// sending a request's body once the answer has begun (nginx).
const HeaderHalfDuplex = "Sema-Half-Duplex"

// Error is every error answer: {"errorCode": "...", "message": "..."}. The
// message names the field at fault, never a secret.
type Error struct {
	Code    string `json:"errorCode"`
	Message string `json:"message"`
}

// APIKeyPrefix starts every API key; 43 base64url characters follow.
const APIKeyPrefix = "sema_"

// EnrollTokenPrefix starts every enrollment token (POST
// /v1/devices/enroll-tokens). A token may also stand for its identity's
// credential on POST /v1/devices/enroll, for itself alone.
const EnrollTokenPrefix = "set_"

// Error codes of the error answers (docs/api.md's table).
const (
	CodeInvalidJSON         = "request.invalid_json"
	CodeBodyShape           = "request.body_shape"
	CodeFieldInvalid        = "request.field_invalid"
	CodeBodyTooLarge        = "request.body_too_large"
	CodeLengthRequired      = "request.length_required"
	CodeBodyTimeout         = "request.body_timeout"
	CodeNotFound            = "request.not_found"
	CodeMethodNotAllowed    = "request.method_not_allowed"
	CodeForbidden           = "auth.forbidden"
	CodeUnauthorized        = "auth.unauthorized"
	CodeOriginForbidden     = "auth.origin_forbidden"
	CodeAPIKeyLimit         = "api_key.limit_reached"
	CodeNameTaken           = "identity.name_taken"
	CodeAdminNotDisabled    = "identity.admin"
	CodeIdentityNotFound    = "identity.not_found"
	CodeEnrollmentInvalid   = "device.enrollment_invalid"
	CodeDeviceNotFound      = "device.not_found"
	CodeInstructionNotFound = "instruction.not_found"
	CodeRateExceeded        = "limit.rate_exceeded"
	CodeLaneRequired        = "capability.device_lane_required"
	CodeUnavailable         = "service.unavailable"
	CodeBusy                = "service.busy"
	// CodeInternal answers a response that could not be encoded.
	CodeInternal = "internal"
)

// Device is one device of GET /v1/devices and the answer of
// POST /v1/devices/{id}/revoke. Times are RFC 3339 UTC with milliseconds.
type Device struct {
	DeviceID      string `json:"deviceId"`
	DisplayName   string `json:"displayName,omitempty"`
	PlatformOS    string `json:"platformOs"`
	PlatformArch  string `json:"platformArch,omitempty"`
	WorkspaceRoot string `json:"workspaceRoot"`
	CreatedAt     string `json:"createdAt"`
	Revoked       bool   `json:"revoked"`
	RevokedAt     string `json:"revokedAt,omitempty"`
	// Presence: on the answering replica, or, with replicas on one
	// registry, on the replica holding the device's live lease,
	// which Replica names (absent on a single replica). ConnectedSince
	// and Inflight are known to the holder only: for a device another
	// replica holds, the answering replica asks it (Inflight adds any of
	// the device's calls the answering replica still has); a holder that
	// does not answer within a second leaves ConnectedSince absent and
	// Inflight counting the answering replica's calls only.
	Online         bool   `json:"online"`
	Gen            string `json:"gen,omitempty"`
	ConnectedSince string `json:"connectedSince,omitempty"`
	Inflight       int    `json:"inflight"`
	Replica        string `json:"replica,omitempty"`
}

// GET /v1/devices is paged: ?limit= devices at most (DefaultDevicePage
// when absent), ?after= the next of an earlier answer, ?online=true only
// the devices connected to the replica answering.
const (
	DefaultDevicePage = 500
	MaxDevicePage     = 1000
)

// DeviceList is the answer of GET /v1/devices: one page. Devices is never
// null; Next, when present, is the cursor of the next page (pass it as
// ?after=), absent at the end of the list.
type DeviceList struct {
	Devices []Device `json:"devices"`
	Next    string   `json:"next,omitempty"`
}

// EnrollTokenResponse is the answer of POST /v1/devices/enroll-tokens: the
// token's plaintext exists only here.
type EnrollTokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expiresAt"`
	TTLSec    int64  `json:"ttlSec"`
}

// EnrollResponse is the answer of POST /v1/devices/enroll.
type EnrollResponse struct {
	DeviceID string `json:"deviceId"`
}

// CancelResponse is the 202 answer of POST /v1/instructions/{id}/cancel.
type CancelResponse struct {
	InstructionID string `json:"instructionId"`
}

// InstructionRequest is the closed body of
// POST /v1/devices/{id}/instructions.
type InstructionRequest struct {
	Kind protocol.InstructionKind `json:"kind"`
	// Args is the kind's args object of §3.1: a protocol args value
	// (protocol.CommandArgs, protocol.PathArgs, protocol.DirArgs …) or, for
	// the write family, WriteArgs (the lane computes contentLen and sha256).
	Args      any               `json:"args"`
	Cwd       string            `json:"cwd,omitempty"`
	ShellEnv  map[string]string `json:"shellEnv,omitempty"`
	TimeoutMs int64             `json:"timeoutMs"`
	// ContentB64 is the write family's content in canonical standard base64.
	ContentB64    *string `json:"contentB64,omitempty"`
	RootSessionID string  `json:"rootSessionId,omitempty"`
}

// WriteArgs are the write family's args as the HTTP API takes them: §3.1's
// WriteArgs without contentLen and sha256, which the lane computes from the
// content (or takes from the upload's query).
type WriteArgs struct {
	Path   string           `json:"path"`
	Expect *protocol.Expect `json:"expect,omitempty"`
}

// Outcome is any arm of an instruction's outcome (§3.3) in one flat shape:
// a reader looks at OK and Kind (or ErrorCode) and then at the fields that
// arm has.
type Outcome struct {
	OK   bool                 `json:"ok"`
	Kind protocol.OutcomeKind `json:"kind,omitempty"`
	// exec
	ExitCode  *int                `json:"exitCode,omitempty"`
	Truncated *protocol.Truncated `json:"truncated,omitempty"`
	// ok:false
	ErrorCode protocol.ErrorCode `json:"errorCode,omitempty"`
	Message   string             `json:"message,omitempty"`
	// cancelled: the cancel receipt's state (§5.3)
	State protocol.CancelState `json:"state,omitempty"`
	// stat
	Info          *protocol.FileInfo  `json:"info,omitempty"`
	Entries       []protocol.FileInfo `json:"entries,omitempty"`
	ExistsValue   *bool               `json:"existsValue,omitempty"`
	CanonicalPath string              `json:"canonicalPath,omitempty"`
	// LinkTarget is readLink's target; nil for "not a symlink" (null).
	LinkTarget *string `json:"linkTarget,omitempty"`
	// write
	Inode   string `json:"inode,omitempty"`
	Created *bool  `json:"created,omitempty"`
}

// The streamed write upload: POST /v1/devices/{id}/writes?QUERY with the
// raw content as the body (Content-Length required). Its answer is the
// event stream of the instructions endpoint. The query keys:
const (
	UploadKind          = "kind"          // a write-family kind; default writeFile
	UploadPath          = "path"          // absolute and normalized, as args.path
	UploadTimeoutMs     = "timeoutMs"     // a positive integer
	UploadSHA256        = "sha256"        // 64 lowercase hex: the SHA-256 of the body
	UploadExpect        = "expect"        // writeFileGuarded only: its expect object as JSON
	UploadRootSessionID = "rootSessionId" // optional
)

// UploadRequest is what the upload's query carries besides the body's
// digest.
type UploadRequest struct {
	Kind          protocol.InstructionKind // "" is writeFile
	Path          string
	TimeoutMs     int64
	Expect        *protocol.Expect // writeFileGuarded only
	RootSessionID string
}

// Error codes of the identities, API keys and sessions.
const (
	// CodeSessionDeviceMismatch: the root session is bound to another
	// device (§9); the message names it. Rebind explicitly to change.
	CodeSessionDeviceMismatch = "session.device_mismatch"
	// CodeSessionNotFound: the caller has no binding of that root session.
	CodeSessionNotFound = "session.not_found"
	// CodeSessionLimit: binding one more root session would pass the
	// lane's bound per identity; the message names it.
	CodeSessionLimit = "session.limit_reached"
	// CodeAPIKeyNotFound: the caller has no such key (another identity's
	// key is indistinguishable from none).
	CodeAPIKeyNotFound = "api_key.not_found"
	// CodeLastAdminKey: revoking the admin's last key is refused, so that
	// the lane is never without an admin key.
	CodeLastAdminKey = "api_key.last_admin_key"
	// CodeDeviceRevoked: a session cannot be rebound to a revoked device.
	CodeDeviceRevoked = "device.revoked"
	// CodeDeviceNotRevoked: only a revoked device is forgotten.
	CodeDeviceNotRevoked = "device.not_revoked"
)

// RenameDeviceRequest is the closed body of POST /v1/devices/{id}/rename.
type RenameDeviceRequest struct {
	DisplayName string `json:"displayName"`
}

// CreateIdentityRequest is the closed body of POST /v1/identities.
type CreateIdentityRequest struct {
	Name string `json:"name"`
}

// CreateIdentityResponse is the answer of POST /v1/identities: the new
// identity's API key in plaintext exists only here.
type CreateIdentityResponse struct {
	IdentityID string `json:"identityId"`
	Name       string `json:"name"`
	APIKey     string `json:"apiKey"`
}

// Identity is one identity of GET /v1/identities.
type Identity struct {
	IdentityID string `json:"identityId"`
	Name       string `json:"name"`
	CreatedAt  string `json:"createdAt"`
	Admin      bool   `json:"admin"`
	// DisabledAt is set while the identity is disabled: its keys are
	// refused (POST /v1/identities/{id}/disable, /enable).
	DisabledAt string `json:"disabledAt,omitempty"`
}

// IdentityList is the answer of GET /v1/identities. Identities is never
// null.
type IdentityList struct {
	Identities []Identity `json:"identities"`
}

// CreateAPIKeyResponse is the answer of POST /v1/api-keys: the key's
// plaintext exists only here.
type CreateAPIKeyResponse struct {
	KeyID  string `json:"keyId"`
	APIKey string `json:"apiKey"`
}

// APIKey is one key of GET /v1/api-keys and the answer of
// DELETE /v1/api-keys/{keyId}: never the key itself. LastUsedAt is at most
// a minute stale and absent before the first use.
type APIKey struct {
	KeyID      string `json:"keyId"`
	CreatedAt  string `json:"createdAt"`
	LastUsedAt string `json:"lastUsedAt,omitempty"`
	RevokedAt  string `json:"revokedAt,omitempty"`
}

// APIKeyList is the answer of GET /v1/api-keys: the caller's keys that are
// not revoked. APIKeys is never null.
type APIKeyList struct {
	APIKeys []APIKey `json:"apiKeys"`
}

// RebindRequest is the closed body of
// POST /v1/sessions/{rootSessionId}/rebind.
type RebindRequest struct {
	DeviceID string `json:"deviceId"`
}

// Session is a root session's binding to a device (§9): the answer of
// GET /v1/sessions/{rootSessionId} and of its rebind.
type Session struct {
	RootSessionID string `json:"rootSessionId"`
	DeviceID      string `json:"deviceId"`
	BoundAt       string `json:"boundAt"`
}

// Error codes of a request one replica forwards to another.
const (
	// CodeOutcomeUnknown: the replica holding the device failed after the
	// request reached it and before its answer began; the instruction may
	// have run. It is never dispatched again elsewhere.
	CodeOutcomeUnknown = "instruction.outcome_unknown"
	// CodeDeviceConnected: a replica asked for a device's lease is keeping
	// it, because its connection to the device is live.
	CodeDeviceConnected = "device.connected"
)

// PresenceAsk is the body of POST /v1/cluster/presence, which one replica
// of a cluster sends another: the devices whose presence it asks for.
type PresenceAsk struct {
	DeviceIDs []string `json:"deviceIds"`
}

// HeldPresence is a device's presence on the replica that holds it: the
// answer of POST /v1/cluster/presence maps device ids to it.
type HeldPresence struct {
	Online         bool   `json:"online"`
	ConnectedSince string `json:"connectedSince,omitempty"`
	Inflight       int    `json:"inflight"`
}

// EnrollmentInvalidText is the single explanation of 403
// device.enrollment_invalid: the four refusals behind it are deliberately
// indistinguishable on the wire (§1.1), so it says all of them.
const EnrollmentInvalidText = "Enrollment was refused. The token may have expired, may already have been used " +
	"by another device, or may have been issued to a different account. Ask for a new enrollment token and try again."

// The endpoints one replica of a cluster calls on another (§8); a request
// to them that no replica signed is refused.
const (
	// PresencePath: POST a PresenceAsk, answered with a map of device ids
	// to HeldPresence.
	PresencePath = "/v1/cluster/presence"
	// HandoverPath: POST with ?holder= the lease's holder, to have the
	// replica let go of a device's lease (200) unless the device's
	// connection there is live (409).
	HandoverPath = "/v1/cluster/devices/{id}/handover"
)

// WireTime is how the API writes a time: RFC 3339 UTC with milliseconds,
// as JavaScript's toISOString writes it.
func WireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// CapabilitiesResponse is the answer of GET /v1/capabilities when the
// deployment runs the device lane; one that does not answers
// {"deviceExecutor": false}.
type CapabilitiesResponse struct {
	DeviceExecutor Capabilities `json:"deviceExecutor"`
}

// Capabilities is GET /v1/capabilities's deviceExecutor object: an
// executor reads wsPath from it, never a path of its own (§1).
type Capabilities struct {
	Enabled              bool            `json:"enabled"`
	ProtocolVersion      int             `json:"protocolVersion"`
	MaxInflightPerDevice int             `json:"maxInflightPerDevice"`
	WSPath               string          `json:"wsPath"`
	Management           ManagementPaths `json:"management"`
}

// ManagementPaths tells clients where the management verbs are.
type ManagementPaths struct {
	EnrollTokens string `json:"enrollTokens"`
	Enroll       string `json:"enroll"`
	Devices      string `json:"devices"`
	MCP          string `json:"mcp"`
	Identities   string `json:"identities"`
	APIKeys      string `json:"apiKeys"`
	Sessions     string `json:"sessions"`
}

// EnrollRequest is the closed body of POST /v1/devices/enroll (§1.1).
type EnrollRequest struct {
	Token         string `json:"token"`
	Pubkey        string `json:"pubkey"`
	PlatformOS    string `json:"platformOs"`
	PlatformArch  string `json:"platformArch,omitempty"`
	DisplayName   string `json:"displayName,omitempty"`
	WorkspaceRoot string `json:"workspaceRoot"`
}
