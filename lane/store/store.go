// Package store is the lane server's registry: identities and their API
// keys, enrollment tokens, devices, the per-device generation counter and
// connection lease, and the audit trail. Store is the one interface; the
// backends live in their own packages (sqlite, the embedded default, and
// postgres, for scale-out), share one implementation of the rules
// (sqlstore), and pass one conformance suite (storetest).
//
// Secrets are never stored: API keys and enrollment tokens are kept as
// SHA-256 digests of high-entropy random values, and audit rows carry
// reason codes, never a token or a key. Every expiry is computed and
// compared by the database clock.
package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// Store is the lane's registry. All methods are safe for concurrent use.
type Store interface {
	// CreateIdentity adds an identity (a user of the lane), not an admin.
	CreateIdentity(ctx context.Context, name string) (Identity, error)
	// CreateAdminIdentity adds an identity marked as the lane's admin,
	// unless the registry has one: then ErrAdminExists, also when another
	// process creates one at the same moment (exactly one of them does).
	CreateAdminIdentity(ctx context.Context, name string) (Identity, error)
	// SetIdentityDisabled disables an identity, whose keys are then
	// refused at once, or enables it again; ErrNotFound if there is none,
	// ErrAdminNotDisabled for the admin.
	SetIdentityDisabled(ctx context.Context, id string, disabled bool) (Identity, error)
	// ListIdentities returns every identity, oldest first.
	ListIdentities(ctx context.Context) ([]Identity, error)
	// CreateAPIKey stores the digest of a new API key for an identity.
	CreateAPIKey(ctx context.Context, identityID string, digest Digest) (APIKey, error)
	// IdentityByAPIKey finds the identity owning a key that is not revoked;
	// ErrNotFound if none (a revoked key is refused at once). It records
	// the key's use at most once a minute (LastUsedAtGranularity), so that
	// authenticating is not a registry write per request.
	IdentityByAPIKey(ctx context.Context, digest Digest) (Identity, error)
	// IdentityByEnrollToken finds the identity an enrollment token was
	// issued to while the token has not expired; ErrNotFound otherwise. It
	// lets the token itself stand for the user's credential on the one
	// call it is for (POST /v1/devices/enroll).
	IdentityByEnrollToken(ctx context.Context, digest Digest) (Identity, error)
	// ListAPIKeys returns an identity's keys that are not revoked, oldest
	// first.
	ListAPIKeys(ctx context.Context, identityID string) ([]APIKey, error)
	// RevokeAPIKey revokes a key of ownerID ("" for any identity's: the
	// admin's right); a second revoke is a no-op. ErrNotFound if there is
	// no such key of that owner; ErrLastAdminKey if it is the admin's last
	// key that is not revoked (the lane is never left without an admin key).
	RevokeAPIKey(ctx context.Context, ownerID, keyID string) (APIKey, error)

	// BindSession binds a root session of an owner to a device unless it is
	// bound already, and returns the binding that holds: the new one, or
	// the one found, which may name another device (§9). Concurrent first
	// binds have exactly one winner, decided by the database. A binding
	// found has its use recorded (UsedAt, within SessionUseGranularity). A
	// new binding is refused with ErrSessionLimit when the owner holds max
	// bindings (0: no limit).
	BindSession(ctx context.Context, ownerID, rootSessionID, deviceID string, max int) (Session, error)
	// RebindSession binds a root session of an owner to a device, replacing
	// any binding (§9's explicit rebind); bound to the same device it is a
	// no-op. An unbound session is a new binding, under max as BindSession.
	RebindSession(ctx context.Context, ownerID, rootSessionID, deviceID string, max int) (Session, error)
	// DeleteSession removes an owner's binding; ErrNotFound when unbound.
	DeleteSession(ctx context.Context, ownerID, rootSessionID string) error
	// PruneSessions deletes the bindings not used for idle, by the
	// database clock, and returns how many.
	PruneSessions(ctx context.Context, idle time.Duration) (int64, error)
	// Session returns an owner's binding of a root session; ErrNotFound
	// when unbound.
	Session(ctx context.Context, ownerID, rootSessionID string) (Session, error)

	// CreateEnrollToken stores the digest of a new one-shot enrollment token
	// issued to identityID, expiring ttl after the database's now.
	CreateEnrollToken(ctx context.Context, identityID string, digest Digest, ttl time.Duration) (EnrollToken, error)
	// RegisterDevice consumes a token for a public key and creates the
	// device, in one transaction (§1.1). A replay with the same token and
	// the same key returns the same device and creates nothing. Refusals are
	// an *EnrollRefusedError whose reason is for the audit trail only.
	// created is false for a replay.
	RegisterDevice(ctx context.Context, r Registration) (dev Device, created bool, err error)

	// Device returns a device by id; ErrNotFound if none.
	Device(ctx context.Context, id string) (Device, error)
	// ListDevices returns one page of an identity's devices, oldest first
	// (by creation time, then id). ErrNotFound if page.After names no
	// device of that owner.
	ListDevices(ctx context.Context, ownerID string, page DevicePage) ([]Device, error)
	// RevokeDevice revokes an owner's device; revocation is terminal and a
	// second revoke is a no-op. ErrNotFound if the owner has no such device.
	// It also drops the device's lease.
	RevokeDevice(ctx context.Context, ownerID, deviceID string) (Device, error)
	// RenameDevice sets an owner's device's display name; ErrNotFound for
	// a device that is not the owner's, as for none.
	RenameDevice(ctx context.Context, ownerID, deviceID, name string) (Device, error)
	// ForgetDevice removes a revoked device's row, its sessions and its
	// enrollment token, and returns the device as it was; the audit rows
	// that name it stay. ownerID "" is the admin, for any identity's device.
	// ErrNotFound for a device that is not the owner's, ErrNotRevoked for
	// one that is not revoked.
	ForgetDevice(ctx context.Context, ownerID, deviceID string) (Device, error)

	// AcquireLease takes a device's connection lease for a holder (one
	// connection) and bumps the device's generation, unless a live lease is
	// held by another holder: then ErrLeaseHeld. A lease is live until its
	// expiry by the database clock; takeover names a holder the caller has
	// judged stale, whose lease may be taken even while unexpired.
	AcquireLease(ctx context.Context, req LeaseRequest) (Lease, error)
	// AcquireLeases decides many requests as AcquireLease would, in one
	// transaction: a burst of connections costs one commit per batch, not
	// one each. Each outcome is its request's, in order; an error is the
	// database failing, and then no lease of the batch was taken.
	AcquireLeases(ctx context.Context, reqs []LeaseRequest) ([]LeaseOutcome, error)
	// RenewLease extends a holder's lease by ttl from the database's now;
	// ErrLeaseLost if the holder no longer holds it.
	RenewLease(ctx context.Context, deviceID, holder string, ttl time.Duration) (Lease, error)
	// RenewReplicaLeases extends by ttl from the database's now every lease
	// taken with LeaseRequest.Replica replica whose device is not revoked,
	// in one statement, and returns the leases it renewed. A lease another
	// replica has taken since is never touched.
	RenewReplicaLeases(ctx context.Context, replica string, ttl time.Duration) ([]HeldLease, error)
	// ReleaseLease drops a holder's lease; a no-op if it holds none.
	ReleaseLease(ctx context.Context, deviceID, holder string) error
	// ReleaseReplicaLeases drops every lease taken with LeaseRequest.Replica
	// replica, in one statement, and returns how many it dropped. A lease a
	// holder of another replica has taken since is never touched.
	ReleaseReplicaLeases(ctx context.Context, replica string) (int64, error)

	// RegisterReplica records a lane server process as a replica reached
	// at advertiseURL (docs/operations.md), its start and heartbeat the
	// database's now; registering an id again renews its row and clears
	// its draining mark.
	RegisterReplica(ctx context.Context, id, advertiseURL string) error
	// HeartbeatReplica marks a replica alive at the database's now;
	// ErrNotFound if its row is gone, and then it registers again.
	HeartbeatReplica(ctx context.Context, id string) error
	// MarkReplicaDraining records that a replica has begun to shut down;
	// ErrNotFound if its row is gone.
	MarkReplicaDraining(ctx context.Context, id string) error
	// RemoveReplica deletes a replica's row; a no-op if there is none.
	RemoveReplica(ctx context.Context, id string) error
	// PruneReplicas deletes the rows of the replicas whose heartbeat is
	// older than staleFor by the database's now (killed processes: each
	// start has a new id), and returns how many it deleted.
	PruneReplicas(ctx context.Context, staleFor time.Duration) (int64, error)
	// ListReplicas returns every replica, oldest first, each Live if its
	// heartbeat is within live of the database's now.
	ListReplicas(ctx context.Context, live time.Duration) ([]Replica, error)
	// ClusterSecrets returns the registry's cluster secret, the key of the
	// replicas' requests to each other: the one stored, or candidate if
	// none was, stored now (concurrent first calls agree on one); with the
	// one a rotation replaced, if any.
	ClusterSecrets(ctx context.Context, candidate string) (ClusterSecrets, error)
	// RotateClusterSecret makes next the cluster secret and the current
	// one the previous; ErrNotFound if none was ever stored.
	RotateClusterSecret(ctx context.Context, next string) error

	// Audit appends audit rows, all in one transaction; At is set by the
	// database.
	Audit(ctx context.Context, events ...AuditEvent) error
	// AuditEvents returns audit rows, oldest first, matching the filter.
	AuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, error)
	// PruneAudit deletes the rows older than retention by the database
	// clock, except those of the events in keep, and returns how many. It
	// prunes the chain from its oldest row on and stops at the first row
	// within the retention, and records the last row it pruned as the
	// chain's anchor, so that the chain stays verifiable from the oldest
	// row kept.
	PruneAudit(ctx context.Context, retention time.Duration, keep []string) (int64, error)

	// ChainHead returns a hash chain's head (docs/audit.md): the seq and
	// digest of its last row, seq 0 and the genesis before any.
	ChainHead(ctx context.Context, chain string) (ChainHead, error)
	// VerifyChain recomputes a hash chain from a checkpoint (nil: from its
	// anchor, the prev of the oldest row kept) to its head, and names the
	// first row that does not match: edited, removed, added or moved. A
	// mismatch is the report's Problem, not an error; ErrNotFound for a
	// chain this store does not keep.
	VerifyChain(ctx context.Context, chain string, from *ChainHead) (ChainReport, error)
	// RecordHistory appends instruction history rows to the history's hash
	// chain, all in one transaction. Each gets the next seq, assigned under
	// the chain's lock, so a row committed later always has a higher seq; a
	// row whose instruction has one already is skipped.
	RecordHistory(ctx context.Context, rows ...HistoryRow) error
	// History returns history rows, in seq order, matching the filter.
	History(ctx context.Context, f HistoryFilter) ([]HistoryRow, error)
	// HistoryRow returns the row of one instruction; ErrNotFound if none.
	HistoryRow(ctx context.Context, instructionID string) (HistoryRow, error)
	// PruneHistory deletes the rows written longer than retention ago by
	// the database clock, as a prefix of the chain (its anchor moves to the
	// last one deleted), and returns how many.
	PruneHistory(ctx context.Context, retention time.Duration) (int64, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the database.
	Close() error
}

// HeldLease is one lease RenewReplicaLeases renewed.
type HeldLease struct {
	DeviceID string
	Holder   string
}

// DevicePage asks ListDevices for one page, read as one range of the
// owner's index: never all the devices loaded, then sliced.
type DevicePage struct {
	// After is a device id of the owner: the page starts right after it in
	// the list's order. "" starts at the oldest device.
	After string
	// Limit is the most devices returned; 0 returns all that follow
	// (in-process callers only: the HTTP face always bounds it).
	Limit int
}

// Digest is the SHA-256 of a secret (API key or enrollment token).
type Digest [sha256.Size]byte

// DigestOf returns the SHA-256 of a secret.
func DigestOf(secret string) Digest { return sha256.Sum256([]byte(secret)) }

// Identity is a user of the lane.
type Identity struct {
	ID        string // idn_<ULID>
	Name      string
	CreatedAt time.Time
	// Admin marks the lane's admin: it may create and list identities and
	// revoke any identity's API key.
	Admin bool
	// DisabledAt is when the identity was disabled: none of its keys is
	// accepted while it is set. Nil when enabled.
	DisabledAt *time.Time
	// APIKeyID is the key the identity was found by (IdentityByAPIKey
	// only; "" otherwise).
	APIKeyID string
}

// APIKey is the stored side of an API key: never its text.
type APIKey struct {
	ID         string // key_<ULID>
	IdentityID string
	CreatedAt  time.Time
	LastUsedAt *time.Time // nil before its first use; at most a minute stale
	RevokedAt  *time.Time // nil while not revoked
}

// LastUsedAtGranularity is how stale APIKey.LastUsedAt may be: a key's use
// is written at most once per this interval.
const LastUsedAtGranularity = time.Minute

// Session is a root session's binding to a device (§9), per owner.
type Session struct {
	OwnerID       string
	RootSessionID string
	DeviceID      string
	BoundAt       time.Time
	UsedAt        time.Time // the last use recorded, within SessionUseGranularity
}

// SessionUseGranularity is how stale Session.UsedAt may be: a binding's use
// is written at most once per this interval.
const SessionUseGranularity = time.Hour

// EnrollToken is the stored side of an enrollment token: never its text.
type EnrollToken struct {
	IdentityID string
	ExpiresAt  time.Time
	TTL        time.Duration
}

// Registration is one POST /v1/devices/enroll.
type Registration struct {
	TokenDigest   Digest
	IdentityID    string // the caller
	PublicKey     []byte // raw 32-byte Ed25519 public key
	PlatformOS    string
	PlatformArch  string
	DisplayName   string
	WorkspaceRoot string
}

// Device is an enrolled device.
type Device struct {
	ID            string // dev_<ULID>
	OwnerID       string
	PublicKey     []byte
	PlatformOS    string
	PlatformArch  string
	DisplayName   string
	WorkspaceRoot string
	CreatedAt     time.Time
	RevokedAt     *time.Time // nil while not revoked; revocation is terminal
	Generation    uint64     // the last generation handed out; 0 before any
	// Leased is whether a connection holds a live lease on the device, by
	// the database clock (the registry's presence of a device), and
	// LeaseReplica the replica that took it ("" when none is named).
	Leased       bool
	LeaseReplica string
}

// Revoked reports whether the device is revoked.
func (d Device) Revoked() bool { return d.RevokedAt != nil }

// LeaseRequest asks for a device's connection lease.
type LeaseRequest struct {
	DeviceID string
	Holder   string // the connection taking the lease
	Epoch    string // the executor process epoch of that connection
	// Replica names the lane server process taking the lease, for
	// ReleaseReplicaLeases; "" names none.
	Replica string
	TTL     time.Duration
	// Takeover, when not "", is a holder the caller judged stale: its lease
	// may be taken even while unexpired.
	Takeover string
}

// LeaseOutcome is one request's answer in AcquireLeases: a lease, or
// ErrNotFound, ErrRevoked or ErrLeaseHeld.
type LeaseOutcome struct {
	Lease Lease
	Err   error
}

// IsLeaseRefusal reports whether err is a lease request's own refusal
// (the device is unknown or revoked, or its lease is held), not the
// database failing.
func IsLeaseRefusal(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrRevoked) || errors.Is(err, ErrLeaseHeld)
}

// Replica is one lane server process on the registry.
type Replica struct {
	ID           string
	AdvertiseURL string // where the other replicas reach it
	StartedAt    time.Time
	HeartbeatAt  time.Time
	DrainingAt   *time.Time // set once it began to shut down
	Live         bool       // its heartbeat is within ListReplicas' bound
}

// ClusterSecrets is the cluster secret and, after a rotation, the one it
// replaced, with the rotation's age by the database clock.
type ClusterSecrets struct {
	Current    string
	Previous   string        // "" if never rotated
	RotatedAgo time.Duration // since the last rotation, when Previous is set
}

// Lease is a held connection lease.
type Lease struct {
	DeviceID  string
	Holder    string
	Epoch     string
	Gen       uint64 // the generation of this connection
	ExpiresAt time.Time
	// Previous is the holder whose lease this one replaced ("" if the lease
	// was free or expired), PreviousEpoch its epoch and PreviousReplica its
	// replica. With ErrLeaseHeld they name the holder that keeps it.
	Previous        string
	PreviousEpoch   string
	PreviousReplica string
}

var (
	ErrNotFound  = errors.New("store: not found")
	ErrLeaseHeld = errors.New("store: the connection lease is held by another connection")
	ErrLeaseLost = errors.New("store: the connection lease is no longer held")
	ErrRevoked   = errors.New("store: the device is revoked")
	// ErrNotRevoked: only a revoked device is forgotten.
	ErrNotRevoked = errors.New("store: the device is not revoked")
	// ErrSessionLimit refuses a new root session binding: the owner holds
	// as many as the lane allows.
	ErrSessionLimit = errors.New("store: the identity holds as many root session bindings as the lane allows")
	// ErrNameTaken refuses an identity named as another is.
	ErrNameTaken = errors.New("store: another identity has that name")
	// ErrAdminNotDisabled refuses disabling the admin (the lane would have none).
	ErrAdminNotDisabled = errors.New("store: the admin identity cannot be disabled")
	// ErrAdminExists refuses a second admin identity.
	ErrAdminExists = errors.New("store: the registry has an admin identity already")
	// ErrLastAdminKey refuses revoking the admin's last API key.
	ErrLastAdminKey = errors.New("store: this is the admin's last API key")
)

// EnrollRefusal is why a registration was refused. On the wire all four are
// one byte-identical 403 (§1.1, anti-enumeration); only the audit trail
// tells them apart.
type EnrollRefusal string

const (
	RefusedUnknownToken  EnrollRefusal = "token_unknown"
	RefusedExpired       EnrollRefusal = "token_expired"
	RefusedWrongIdentity EnrollRefusal = "token_wrong_identity"
	RefusedTokenReuse    EnrollRefusal = "token_reuse" // same token, another key
)

// EnrollRefusedError is a refused registration.
type EnrollRefusedError struct{ Reason EnrollRefusal }

func (e *EnrollRefusedError) Error() string {
	return fmt.Sprintf("store: enrollment refused (%s)", e.Reason)
}
