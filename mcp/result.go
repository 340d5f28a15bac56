package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/protocol"
)

// Failure is the structured content of a tool result with isError: the
// protocol's errorCode (§3.3) or the lane's (docs/api.md), and its message.
type Failure struct {
	ErrorCode     string `json:"errorCode"`
	Message       string `json:"message"`
	InstructionID string `json:"instructionId,omitempty"`
	DeviceID      string `json:"deviceId,omitempty"`
	// MayHaveRun: the outcome is not known (the stream broke, or the
	// device could not say): do not assume it did not run.
	MayHaveRun bool `json:"mayHaveRun,omitempty"`
}

// Error codes of the tool failures that are neither the protocol's nor the
// lane's answer.
const (
	CodeNoDevice    = "mcp.no_device"        // no device, or several and none named
	CodeInvalidArgs = "mcp.invalid_argument" // an argument the lane would refuse
	CodeUnreachable = "lane.unreachable"     // the lane did not answer
	CodeCancelled   = "mcp.cancelled"        // the client cancelled before anything was sent
)

// failed is a tool result with isError whose text starts with the code.
func failed(f Failure, extra string) *sdk.CallToolResult {
	text := f.ErrorCode + ": " + f.Message
	if extra != "" {
		text += "\n" + extra
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: f}
}

// invalid is a tool result for an argument at fault.
func invalid(format string, args ...any) *sdk.CallToolResult {
	return failed(Failure{ErrorCode: CodeInvalidArgs, Message: fmt.Sprintf(format, args...)}, "")
}

// callFailed is the tool result of an instruction the lane did not follow
// to an outcome: refused (nothing was queued), unreachable, or broken.
func callFailed(ctx context.Context, deviceID string, err error) *sdk.CallToolResult {
	var (
		laneErr   *client.Error
		stream    *client.StreamError
		unreached *client.UnreachableError
		noDevice  *errNoDevice
	)
	switch {
	case errors.As(err, &noDevice):
		return failed(Failure{ErrorCode: CodeNoDevice, Message: noDevice.msg}, "")
	case errors.As(err, &laneErr) && laneErr.MayHaveRun():
		return failed(Failure{ErrorCode: string(protocol.ErrOutcomeUnknown), Message: laneErr.Message, DeviceID: deviceID, MayHaveRun: true}, "")
	case errors.As(err, &unreached) && unreached.MayHaveRun():
		return failed(Failure{ErrorCode: string(protocol.ErrOutcomeUnknown), Message: unreached.Error(), DeviceID: deviceID, MayHaveRun: true}, "")
	case errors.As(err, &laneErr) && laneErr.Code != "":
		return failed(Failure{ErrorCode: laneErr.Code, Message: laneErr.Message, DeviceID: deviceID}, "nothing was sent to the device")
	case errors.As(err, &stream):
		return failed(Failure{ErrorCode: string(protocol.ErrOutcomeUnknown), Message: stream.Error(), InstructionID: stream.InstructionID,
			DeviceID: deviceID, MayHaveRun: true}, "")
	case errors.Is(err, client.ErrNotSent) || (ctx.Err() != nil && !errors.As(err, &unreached)):
		return failed(Failure{ErrorCode: CodeCancelled, Message: "the call was cancelled before the instruction was sent", DeviceID: deviceID}, "")
	case errors.As(err, &unreached):
		return failed(Failure{ErrorCode: CodeUnreachable, Message: unreached.Error(), DeviceID: deviceID}, "")
	}
	return failed(Failure{ErrorCode: CodeUnreachable, Message: err.Error(), DeviceID: deviceID}, "")
}

// outcomeFailed is the tool result of an instruction that ended with an
// ok:false or cancelled outcome.
func outcomeFailed(deviceID string, res client.Result, extra string) *sdk.CallToolResult {
	return failed(outcomeFailure(deviceID, res), extra)
}

// outcomeFailure is the failure an ok:false or cancelled outcome is.
func outcomeFailure(deviceID string, res client.Result) Failure {
	o := res.Outcome
	f := Failure{ErrorCode: string(o.ErrorCode), Message: o.Message, InstructionID: res.ID, DeviceID: deviceID}
	switch {
	case o.Kind == protocol.OutcomeCancelled:
		f.ErrorCode, f.Message = "cancelled", fmt.Sprintf("the instruction was cancelled (%s)", o.State)
	case o.ErrorCode == protocol.ErrOutcomeUnknown:
		f.MayHaveRun = true
	}
	if res.LaneCancelled {
		f.Message = "the lane cancelled the command: " + f.Message
	}
	return f
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
