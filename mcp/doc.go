// Package mcp is the lane's face for agents: the Model Context Protocol
// tools run_command, read_file, write_file, list_directory, file_info and
// list_devices over the lane's HTTP API, on the official Go SDK. One tool
// table serves both transports: `sema mcp` serves it on stdio for a client
// on the caller's machine (the Lane is a *client.Client), and the lane
// serves it on Streamable HTTP at /v1/mcp (the Lane is the lane itself).
//
// Each MCP connection is one root session (§9 of the protocol): every
// instruction it sends carries the session's id, so the lane binds the
// session to the first device it uses and refuses another one.
//
// A tool never hides what it cut: output beyond the cap keeps its head and
// its tail and says, in the text and in the structured result, how many
// bytes were left out. A failure is a tool result with isError set whose
// text starts with the protocol's errorCode.
package mcp
