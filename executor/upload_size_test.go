//go:build !race

package executor_test

// uploadBytes is the size of the streamed upload without the race detector
// (SEMA_SOAK=1 runs 1 GiB: TestStreamedUploadSoak).
const uploadBytes = 300 << 20
