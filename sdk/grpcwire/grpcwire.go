// Package grpcwire is the process transport of the compact-host plugin ABI:
// the same frames as the wasm transport (package abi), carried in
// hashicorp/go-plugin gRPC calls instead of linear memory.
//
// There is no .proto file. The services are hand-written grpc.ServiceDescs
// whose messages are wrapperspb.BytesValue holding one frame, so the only
// schema is the frame's, and a plugin in another language needs just the
// two service descriptions below:
//
//	service compact.v1.Plugin {
//	  rpc Info(BytesValue) returns (BytesValue);      // empty request
//	  rpc Summarize(BytesValue) returns (BytesValue); // frame in, frame out
//	  rpc Truncate(BytesValue) returns (BytesValue);
//	}
//	service compact.v1.Host {                         // served by the host over the GRPCBroker
//	  rpc Complete(BytesValue) returns (BytesValue);
//	  rpc CountTokens(BytesValue) returns (BytesValue);
//	  rpc Log(BytesValue) returns (BytesValue);       // JSON {"level":int,"msg":string}
//	}
//
// Each Plugin call carries the metadata keys MetaCallID and MetaBrokerID;
// the plugin dials the broker ID once and echoes the call ID on its Host
// calls so the host answers with the services of the right call.
//
// Both the SDK (plugin side) and the host (client side) import this
// package; it does not import package sdk.
package grpcwire

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/compact-host/compact-host/abi"
)

// PluginName is the name the plugin is dispensed under.
const PluginName = "compact"

// MaxMessageSize bounds one gRPC message in both directions on both ends:
// the host's 64 MiB output cap plus room for the frame's header.
const MaxMessageSize = 64<<20 + 1<<20

// Metadata keys of a Plugin call.
const (
	MetaCallID   = "compact-call-id"
	MetaBrokerID = "compact-broker-id"
)

// Service and method names.
const (
	PluginService = "compact.v1.Plugin"
	HostService   = "compact.v1.Host"
)

// Handshake is the go-plugin handshake for this ABI major.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  abi.Major,
	MagicCookieKey:   abi.HandshakeCookieKey,
	MagicCookieValue: abi.HandshakeCookieValue,
}

// ServerOptions are the gRPC server options both ends use.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize)}
}

// DialOptions are the gRPC dial options both ends use.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize))}
}

// Handler answers one request frame on the plugin side. export is
// abi.ExportInfo, abi.ExportSummarize or abi.ExportTruncate.
type Handler func(ctx context.Context, host *HostConn, export string, frame []byte) []byte

// HostServer answers the plugin's host calls on the host side, for one
// plugin call.
type HostServer interface {
	// Call answers a request frame for op with a response or error frame.
	Call(ctx context.Context, op uint32, frame []byte) []byte
	Log(level int, msg string)
}

// GRPCPlugin is the go-plugin Plugin of this ABI. The plugin side sets
// Handler; the host side leaves it nil and gets a *Client from Dispense.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Handler Handler
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the Plugin service (plugin side).
func (p *GRPCPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&pluginServiceDesc, &pluginServer{handler: p.Handler, broker: broker})
	return nil
}

// GRPCClient returns a *Client and starts serving the Host service on the
// broker (host side). The server is started once per plugin process.
func (p *GRPCPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	c := &Client{conn: conn, brokerID: broker.NextId()}
	go broker.AcceptAndServe(c.brokerID, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, ServerOptions()...)...)
		s.RegisterService(&hostServiceDesc, (*hostServer)(c))
		return s
	})
	return c, nil
}

// Client calls a process plugin (host side). It is safe for concurrent use.
type Client struct {
	conn     *grpc.ClientConn
	brokerID uint32
	nextCall atomic.Uint64
	calls    sync.Map // call ID (string) -> HostServer
}

// Call sends frame to the plugin's export and returns its answer frame.
// host answers the plugin's host calls made during this call. The error is
// a gRPC status error when the transport failed.
func (c *Client) Call(ctx context.Context, host HostServer, export string, frame []byte) ([]byte, error) {
	method, ok := methodFor[export]
	if !ok {
		return nil, fmt.Errorf("grpcwire: unknown export %q", export)
	}
	id := strconv.FormatUint(c.nextCall.Add(1), 10)
	c.calls.Store(id, host)
	defer c.calls.Delete(id)
	ctx = metadata.AppendToOutgoingContext(ctx, MetaCallID, id, MetaBrokerID, strconv.FormatUint(uint64(c.brokerID), 10))
	out := new(wrapperspb.BytesValue)
	if err := c.conn.Invoke(ctx, "/"+PluginService+"/"+method, &wrapperspb.BytesValue{Value: frame}, out); err != nil {
		return nil, err
	}
	return out.Value, nil
}

var methodFor = map[string]string{
	abi.ExportInfo:      "Info",
	abi.ExportSummarize: "Summarize",
	abi.ExportTruncate:  "Truncate",
}

// pluginServer serves the Plugin service inside the plugin process.
type pluginServer struct {
	handler Handler
	broker  *plugin.GRPCBroker

	mu    sync.Mutex
	hosts map[uint32]*grpc.ClientConn
}

// hostConn returns the connection to the host's Host service, dialling
// the broker ID once.
func (s *pluginServer) hostConn(id uint32) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn, ok := s.hosts[id]; ok {
		return conn, nil
	}
	conn, err := s.broker.DialWithOptions(id, DialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("grpcwire: dial host services: %w", err)
	}
	if s.hosts == nil {
		s.hosts = map[uint32]*grpc.ClientConn{}
	}
	s.hosts[id] = conn
	return conn, nil
}

func (s *pluginServer) handle(ctx context.Context, export string, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	host := &HostConn{server: s, callID: first(md, MetaCallID)}
	if id, err := strconv.ParseUint(first(md, MetaBrokerID), 10, 32); err == nil {
		host.brokerID, host.hasBroker = uint32(id), true
	}
	return &wrapperspb.BytesValue{Value: s.handler(ctx, host, export, req.GetValue())}, nil
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// HostConn is the plugin side's line to the host for one call.
type HostConn struct {
	server    *pluginServer
	callID    string
	brokerID  uint32
	hasBroker bool
}

// Call sends a host operation and returns the host's answer frame.
func (h *HostConn) Call(ctx context.Context, op uint32, frame []byte) ([]byte, error) {
	method := ""
	switch op {
	case abi.OpComplete:
		method = "Complete"
	case abi.OpCountTokens:
		method = "CountTokens"
	default:
		return nil, abi.Errorf(abi.CodeUnsupported, "unknown host operation %d", op)
	}
	out := new(wrapperspb.BytesValue)
	if err := h.invoke(ctx, method, frame, out); err != nil {
		return nil, err
	}
	return out.Value, nil
}

// Log writes a line into the host's log. Failures are dropped: logging
// must never fail a call.
func (h *HostConn) Log(ctx context.Context, level int, msg string) {
	b, _ := json.Marshal(logLine{Level: level, Msg: msg})
	_ = h.invoke(ctx, "Log", b, new(wrapperspb.BytesValue))
}

func (h *HostConn) invoke(ctx context.Context, method string, in []byte, out *wrapperspb.BytesValue) error {
	if !h.hasBroker {
		return abi.Errorf(abi.CodeInternal, "the host sent no broker ID")
	}
	conn, err := h.server.hostConn(h.brokerID)
	if err != nil {
		return err
	}
	ctx = metadata.AppendToOutgoingContext(ctx, MetaCallID, h.callID)
	return conn.Invoke(ctx, "/"+HostService+"/"+method, &wrapperspb.BytesValue{Value: in}, out)
}

type logLine struct {
	Level int    `json:"level"`
	Msg   string `json:"msg"`
}

// hostServer serves the Host service on the host side, routing each call
// to the HostServer of the plugin call it belongs to.
type hostServer Client

func (s *hostServer) serve(ctx context.Context, method string, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	v, ok := s.calls.Load(first(md, MetaCallID))
	if !ok {
		// The plugin call already ended: nobody is waiting for the answer.
		return &wrapperspb.BytesValue{Value: abi.MustEncodeError(abi.Errorf(abi.CodeInvalidRequest, "host call outside of a plugin call"))}, nil
	}
	host := v.(HostServer)
	switch method {
	case "Complete":
		return &wrapperspb.BytesValue{Value: host.Call(ctx, abi.OpComplete, req.GetValue())}, nil
	case "CountTokens":
		return &wrapperspb.BytesValue{Value: host.Call(ctx, abi.OpCountTokens, req.GetValue())}, nil
	default: // Log
		var l logLine
		if err := json.Unmarshal(req.GetValue(), &l); err == nil {
			host.Log(l.Level, l.Msg)
		}
		return &wrapperspb.BytesValue{}, nil
	}
}

// servesFrames is the HandlerType of both service descriptions.
type servesFrames interface {
	serve(ctx context.Context, method string, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
}

func (s *pluginServer) serve(ctx context.Context, method string, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	for export, m := range methodFor {
		if m == method {
			return s.handle(ctx, export, req)
		}
	}
	return nil, fmt.Errorf("grpcwire: unknown method %q", method)
}

func unary(service, method string) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: method,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(servesFrames)
			if interceptor == nil {
				return s.serve(ctx, method, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + service + "/" + method}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return s.serve(ctx, method, req.(*wrapperspb.BytesValue))
			})
		},
	}
}

var pluginServiceDesc = grpc.ServiceDesc{
	ServiceName: PluginService,
	HandlerType: (*servesFrames)(nil),
	Methods:     []grpc.MethodDesc{unary(PluginService, "Info"), unary(PluginService, "Summarize"), unary(PluginService, "Truncate")},
	Metadata:    "compact/v1/plugin",
}

var hostServiceDesc = grpc.ServiceDesc{
	ServiceName: HostService,
	HandlerType: (*servesFrames)(nil),
	Methods:     []grpc.MethodDesc{unary(HostService, "Complete"), unary(HostService, "CountTokens"), unary(HostService, "Log")},
	Metadata:    "compact/v1/host",
}
