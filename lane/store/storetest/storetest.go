// Package storetest is the one conformance suite every store.Store backend
// passes. A backend's test calls Run with a function that opens a fresh,
// empty store for one test.
package storetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// Backend is a store under test with its database handle, which the suite
// reads to prove what is and is not at rest.
type Backend interface {
	store.Store
	DB() *sql.DB
}

// Run runs the suite; open returns a fresh, empty store closed by t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Backend)
	}{
		{"IdentityByAPIKey", testIdentityByAPIKey},
		{"ConcurrentFirstStartsMakeOneAdmin", testConcurrentFirstStartsMakeOneAdmin},
		{"IdentityByEnrollToken", testIdentityByEnrollToken},
		{"IdentityLifecycle", testIdentityLifecycle},
		{"SecretsAreNeverStoredInPlaintext", testSecretsAreNeverStoredInPlaintext},
		{"EnrollTokenExpiresFromTheDatabaseClock", testEnrollTokenExpiry},
		{"RegisterDeviceFirstRegistration", testRegisterFirst},
		{"RegisterDeviceReplaySameKeyIsIndistinguishable", testRegisterReplay},
		{"RegisterDeviceRefusals", testRegisterRefusals},
		{"ConcurrentRegistrationDifferentKeysExactlyOneWins", testConcurrentDifferentKeys},
		{"ConcurrentRegistrationSameKeyOneRow", testConcurrentSameKey},
		{"DevicesAreSeenByTheirOwnerOnly", testDevicesByOwner},
		{"DevicesArePagedInListOrder", testDevicesArePagedInListOrder},
		{"RevocationIsTerminal", testRevocationIsTerminal},
		{"ADeviceIsRenamedByItsOwnerOnly", testADeviceIsRenamedByItsOwnerOnly},
		{"OnlyARevokedDeviceIsForgotten", testOnlyARevokedDeviceIsForgotten},
		{"LeaseAndGeneration", testLeaseAndGeneration},
		{"LeaseExpiresByTheDatabaseClock", testLeaseExpiry},
		{"ConcurrentLeaseAcquisitionOneWinner", testConcurrentLease},
		{"Audit", testAudit},
		{"AFullPoolWaitsAsLongAsTheCallersContext", testFullPoolWaits},
		{"ReleaseReplicaLeasesDrops10000InOneStatement", testReleaseReplicaLeases},
		{"RenewReplicaLeasesRenews10000InOneStatement", testRenewReplicaLeases},
		{"AcquireLeasesDecidesEachRequest", testAcquireLeasesDecidesEachRequest},
		{"ReplicasHaveARowAndAHeartbeat", testReplicasHaveARowAndAHeartbeat},
		{"ReplicasDeadLongArePruned", testReplicasDeadLongArePruned},
		{"ADeviceRowTellsItsLiveLeaseAndReplica", testADeviceRowTellsItsLiveLeaseAndReplica},
		{"TheClusterSecretIsTheFirstOneStored", testTheClusterSecretIsTheFirstOneStored},
		{"TheClusterSecretRotates", testTheClusterSecretRotates},
		{"AuditRowsCarryTheRemoteAddressAndACount", testAuditRemoteAndCount},
		{"AuditWrites15000RowsInOneCall", testAuditBatch},
		{"PruneAuditByTheDatabaseClock", testPruneAudit},
		{"TheAuditTrailIsOneChain", testTheAuditTrailIsOneChain},
		{"TamperingWithTheChainIsNamed", testTamperingWithTheChainIsNamed},
		{"ACheckpointCatchesARewrittenChain", testACheckpointCatchesARewrittenChain},
		{"PruningKeepsTheChainVerifiable", testPruningKeepsTheChainVerifiable},
		{"HistoryRowsReadBackAsWritten", testHistoryRowsReadBackAsWritten},
		{"HistoryHasOneRowPerInstruction", testHistoryHasOneRowPerInstruction},
		{"HistorySeqIsOneOrderAcrossWriters", testHistorySeqIsOneOrderAcrossWriters},
		{"HistoryFiltersAndPages", testHistoryFiltersAndPages},
		{"HistoryWrites10000RowsInOneCall", testHistoryWrites10000RowsInOneCall},
		{"PruneHistoryByTheDatabaseClock", testPruneHistoryByTheDatabaseClock},
		{"AdminIsAMarkOnAnIdentity", testAdminIsAMarkOnAnIdentity},
		{"APIKeysHaveIDsAndAreListedPerIdentity", testAPIKeysHaveIDsAndAreListedPerIdentity},
		{"ARevokedKeyIsRefusedAtOnce", testARevokedKeyIsRefusedAtOnce},
		{"TheAdminsLastKeyIsNeverRevoked", testTheAdminsLastKeyIsNeverRevoked},
		{"KeyUseIsRecordedAtMostOnceAMinute", testKeyUseIsRecordedAtMostOnceAMinute},
		{"SessionFirstBindWins", testFirstBindWins},
		{"SessionsBelongToTheirOwner", testSessionsBelongToTheirOwner},
		{"SessionConcurrentFirstBindsOneWinner", testConcurrentFirstBindsOneWinner},
		{"SessionRebindReplacesTheBinding", testRebindReplacesTheBinding},
		{"SessionLimit", testSessionLimit},
		{"SessionsUnusedArePruned", testSessionsUnusedArePruned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func newIdentity(t *testing.T, s Backend, name string) store.Identity {
	t.Helper()
	idn, err := s.CreateIdentity(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return idn
}

func newKey(t *testing.T) []byte {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func newToken(t *testing.T, s Backend, identityID string, ttl time.Duration) store.Digest {
	t.Helper()
	d := store.DigestOf(fmt.Sprintf("set_token_%d_%s", time.Now().UnixNano(), rand.Text()))
	if _, err := s.CreateEnrollToken(ctx(t), identityID, d, ttl); err != nil {
		t.Fatal(err)
	}
	return d
}

func registration(token store.Digest, identityID string, key []byte) store.Registration {
	return store.Registration{
		TokenDigest: token, IdentityID: identityID, PublicKey: key,
		PlatformOS: "linux", PlatformArch: "amd64", DisplayName: "laptop", WorkspaceRoot: "/home/u/work",
	}
}

func register(t *testing.T, s Backend, identityID string) store.Device {
	t.Helper()
	d, _, err := s.RegisterDevice(ctx(t), registration(newToken(t, s, identityID, time.Minute), identityID, newKey(t)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func refusal(err error) store.EnrollRefusal {
	var re *store.EnrollRefusedError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}
