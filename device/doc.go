// Package device is the executor's identity on disk: where it lives (the
// state dir), the Ed25519 private key (device.key, owner-only), the device
// record beside it (device.json), the single-instance lock keyed by the
// device id, and the enrollment client that creates them (§1.1, §6 of the
// device executor protocol).
//
// Where to start:
//
//   - statedir.go: StateDir resolves --state-dir, SEMA_DEVICE_DIR, or the OS
//     config dir + /sema/device.
//   - key.go: GenerateKey, LoadKey (refuses a key group or others can read).
//   - record.go: Record, the enrolled identity (no secret in it).
//   - lock.go: Lock, the flock that keeps one executor per device id.
//   - enroll.go: Enroll, POST /v1/devices/enroll with retry-after honoured.
//
// Nothing here logs the enrollment token, the private key or the user's API
// key, and nothing here writes the token anywhere.
package device
