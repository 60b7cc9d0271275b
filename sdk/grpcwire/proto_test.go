package grpcwire

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/compact-host/compact-host/abi"
)

// protoFile is the contract non-Go authors generate code from; the
// descriptors of this package are written by hand, so this test is what
// keeps the two from drifting.
const protoFile = "../../abi/plugin.proto"

type protoRPC struct {
	name, in, out string
	streaming     bool
}

type protoSpec struct {
	pkg      string
	imports  []string
	services map[string][]protoRPC
}

var (
	lineComment = regexp.MustCompile(`//[^\n]*`)
	packageRE   = regexp.MustCompile(`\bpackage\s+([\w.]+)\s*;`)
	importRE    = regexp.MustCompile(`\bimport\s+"([^"]+)"\s*;`)
	serviceRE   = regexp.MustCompile(`\bservice\s+(\w+)\s*\{([^}]*)\}`)
	rpcRE       = regexp.MustCompile(`\brpc\s+(\w+)\s*\(\s*(stream\s+)?([\w.]+)\s*\)\s*returns\s*\(\s*(stream\s+)?([\w.]+)\s*\)\s*;`)
	messageRE   = regexp.MustCompile(`\b(message|enum)\s+\w+`)
)

// parseProto reads the subset of proto3 the contract uses: a package,
// imports and services of unary or streaming RPCs.
func parseProto(src string) (protoSpec, error) {
	src = lineComment.ReplaceAllString(src, "")
	spec := protoSpec{services: map[string][]protoRPC{}}
	m := packageRE.FindStringSubmatch(src)
	if m == nil {
		return spec, fmt.Errorf("no package statement")
	}
	spec.pkg = m[1]
	for _, m := range importRE.FindAllStringSubmatch(src, -1) {
		spec.imports = append(spec.imports, m[1])
	}
	for _, s := range serviceRE.FindAllStringSubmatch(src, -1) {
		body := s[2]
		for _, r := range rpcRE.FindAllStringSubmatch(body, -1) {
			spec.services[s[1]] = append(spec.services[s[1]], protoRPC{name: r[1], in: r[3], out: r[5], streaming: r[2] != "" || r[4] != ""})
		}
		if rest := strings.TrimSpace(rpcRE.ReplaceAllString(body, "")); rest != "" {
			return spec, fmt.Errorf("service %s: cannot read %q", s[1], rest)
		}
	}
	if m := messageRE.FindString(src); m != "" {
		return spec, fmt.Errorf("%s: the contract defines no messages of its own; every message is a BytesValue", m)
	}
	return spec, nil
}

func TestProtoMatchesDescriptors(t *testing.T) {
	raw, err := os.ReadFile(protoFile)
	require.NoError(t, err)
	spec, err := parseProto(string(raw))
	require.NoError(t, err)

	bytesValue := (&wrapperspb.BytesValue{}).ProtoReflect().Descriptor()
	assert.Equal(t, []string{bytesValue.ParentFile().Path()}, spec.imports)
	field := bytesValue.Fields().ByName("value")
	require.NotNil(t, field)
	assert.Equal(t, protoreflect.FieldNumber(1), field.Number(), "the frame travels in field 1 of BytesValue")
	assert.Equal(t, protoreflect.BytesKind, field.Kind())

	descs := map[string]*grpc.ServiceDesc{PluginService: &pluginServiceDesc, HostService: &hostServiceDesc}
	assert.Len(t, spec.services, len(descs), "services in %s", protoFile)
	for full, desc := range descs {
		name, ok := strings.CutPrefix(full, spec.pkg+".")
		require.True(t, ok, "service %s is outside package %s of %s", full, spec.pkg, protoFile)
		assert.Equal(t, full, desc.ServiceName)
		assert.Empty(t, desc.Streams, "%s has streams; the contract has none", full)
		rpcs := spec.services[name]
		require.NotEmpty(t, rpcs, "%s has no service %s", protoFile, name)
		var protoNames, goNames []string
		for _, r := range rpcs {
			protoNames = append(protoNames, r.name)
			assert.False(t, r.streaming, "%s.%s streams", name, r.name)
			assert.Equal(t, string(proto.MessageName(&wrapperspb.BytesValue{})), r.in, "%s.%s request", name, r.name)
			assert.Equal(t, string(proto.MessageName(&wrapperspb.BytesValue{})), r.out, "%s.%s answer", name, r.name)
		}
		for _, m := range desc.Methods {
			goNames = append(goNames, m.MethodName)
		}
		assert.Equal(t, goNames, protoNames, "methods of %s", full)
	}
	for export, method := range methodFor {
		assert.Contains(t, spec.services["Plugin"], protoRPC{name: method, in: "google.protobuf.BytesValue", out: "google.protobuf.BytesValue"}, "export %s", export)
	}

	// The handshake is written in the file's comments for authors who
	// read only it; they must say what the Go side does.
	text := string(raw)
	for _, want := range []string{
		abi.HandshakeCookieKey + "=" + abi.HandshakeCookieValue,
		fmt.Sprintf("1|%d|tcp|", Handshake.ProtocolVersion),
		MetaCallID, MetaBrokerID,
	} {
		assert.Contains(t, text, want)
	}
}

func TestParseProtoRefusesWhatItCannotRead(t *testing.T) {
	for name, src := range map[string]string{
		"no package": `service Plugin { rpc Info(A) returns (A); }`,
		"a message":  `package p; message Frame { bytes value = 1; }`,
		"an option":  `package p; service Plugin { option deprecated = true; rpc Info(A) returns (A); }`,
	} {
		_, err := parseProto(src)
		assert.Error(t, err, name)
	}
	spec, err := parseProto("package p; // service Fake {}\nservice S { rpc M(stream A) returns (B); }")
	require.NoError(t, err)
	assert.Equal(t, map[string][]protoRPC{"S": {{name: "M", in: "A", out: "B", streaming: true}}}, spec.services)
}
