package lane

import "github.com/sema-agent/sema/lane/audit"

// EventName names an audit row (store.AuditEvent.Event): a closed set, each
// member below with what its row's Reason holds. The metrics count rows by
// these names (metrics.go).
type EventName string

// The connection's events (§1.2, §2.4, R13–R14).
const (
	EventConnected        EventName = "device.connected"         // a handshake completed
	EventDisconnected     EventName = "device.disconnected"      // a connection ended
	EventUpgradeRefused   EventName = "device.upgrade_refused"   // Reason: draining, or which pre-auth cap
	EventHandshakeTimeout EventName = "device.handshake_timeout" // no hello within the deadline
	EventHelloRejected    EventName = "device.hello_rejected"    // Reason: the helloReject code
	EventFrameRejected    EventName = "device.frame_rejected"    // Reason: the reject reason
	EventFrameRepeated    EventName = "device.frame_repeated"    // Reason: the frame type
	EventOutcomeRefused   EventName = "device.outcome_refused"   // Reason: the instruction kind
	EventGoodbye          EventName = "device.goodbye"           // Reason: the goodbye reason
	EventLivenessLost     EventName = "device.liveness_lost"     // no frame within the liveness limit
	EventLeaseLost        EventName = "device.lease_lost"        // the connection lease was lost
	EventAuditDropped     EventName = audit.EventRowsDropped     // Reason: why; Count: how many
)

// The enrollment plane's events (§1.1), written by the HTTP API.
const (
	EventTokenIssued    EventName = "device.enroll_token_issued"
	EventEnrolled       EventName = "device.enrolled"
	EventEnrollReplayed EventName = "device.enroll_replayed"
	EventEnrollRefused  EventName = "device.enroll_refused"      // Reason: the store's refusal
	EventRateLimited    EventName = "device.enroll_rate_limited" // Reason: the bucket
	EventRevoked        EventName = "device.revoked"
	EventRenamed        EventName = "device.renamed"
	EventForgotten      EventName = "device.forgotten"
)

// Identities, keys and sessions, written by the HTTP API.
const (
	EventIdentityCreated  EventName = "identity.created"
	EventIdentityDisabled EventName = "identity.disabled"
	EventIdentityEnabled  EventName = "identity.enabled"
	EventAPIKeyCreated    EventName = "api_key.created"
	EventAPIKeyRevoked    EventName = "api_key.revoked"
	EventSessionRebound   EventName = "session.rebound" // an explicit rebind (§9)
	EventSessionUnbound   EventName = "session.unbound" // a binding deleted by its owner
)
