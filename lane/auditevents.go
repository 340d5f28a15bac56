package lane

// Audit events of the enrollment plane, written by the HTTP API (package
// httpapi); the refusal metrics key on two of them.
const (
	EventTokenIssued    = "device.enroll_token_issued"
	EventEnrolled       = "device.enrolled"
	EventEnrollReplayed = "device.enroll_replayed"
	EventEnrollRefused  = "device.enroll_refused"
	EventRateLimited    = "device.enroll_rate_limited"
	EventRevoked        = "device.revoked"
)

// Audit events of identities, keys and sessions, written by the HTTP API.
const (
	EventIdentityCreated = "identity.created"
	EventAPIKeyCreated   = "api_key.created"
	EventAPIKeyRevoked   = "api_key.revoked"
	EventSessionRebound  = "session.rebound" // an explicit rebind (§9)
)
