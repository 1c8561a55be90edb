package mqtt_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestRealClientsConnectAsTheyAre: Debian's mosquitto_pub and mosquitto_sub connect
// with an empty password (what much device firmware sends), with the token as password
// too, and with no password, in MQTT 3.1.1 and 5: the publish is readable over HTTP when
// mosquitto_pub exits (after its PUBACK), and the subscriber gets the last value.
func TestRealClientsConnectAsTheyAre(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	h := in.http.As(tok)
	host, port := hostPort(in.addr)
	passwords := map[string][]string{"empty": {"-P", ""}, "token": {"-P", tok}, "none": nil}
	for i, version := range []string{"mqttv311", "mqttv5"} {
		for name, pw := range passwords {
			device := fmt.Sprintf("fw-%s-%s", version, name)
			value := fmt.Sprintf("%d.5", 10+i)
			args := append([]string{"-V", version, "-h", host, "-p", port, "-u", tok, "-q", "1",
				"-t", "/v1.6/devices/" + device + "/t", "-m", value}, pw...)
			if out, err := mosquitto(t, "", "mosquitto_pub", args...); err != nil {
				t.Fatalf("%s password %s: mosquitto_pub: %v %s", version, name, err, out)
			}
			if v := values(t, h, device, "t"); len(v) != 1 || fmt.Sprint(v[0]["value"]) != value {
				t.Fatalf("%s password %s: stored after the PUBACK: %v", version, name, v)
			}
			args = append([]string{"-V", version, "-h", host, "-p", port, "-u", tok, "-C", "1", "-W", "10",
				"-t", "/v1.6/devices/" + device + "/t/lv"}, pw...)
			out, err := mosquitto(t, "", "mosquitto_sub", args...)
			if err != nil || strings.TrimSpace(out) != value {
				t.Fatalf("%s password %s: mosquitto_sub: %v %q, want %s", version, name, err, out, value)
			}
		}
	}
	// paho leaves the password flag off for an empty password: that connects too
	c := connect(t, in.addr, tok, func(o *paho.ClientOptions) { o.SetPassword("") })
	publish(t, c, "/v1.6/devices/fw-paho/t", "3")
	if v := values(t, h, "fw-paho", "t"); len(v) != 1 || v[0]["value"] != 3.0 {
		t.Fatalf("paho with an empty password: %v", v)
	}
}

// TestConnectVariantsTheSpecAllows sends raw CONNECT packets (encoded by mochi's
// packet codec, so the flags are exactly as written) for what MQTT 3.1.1 and 5 allow
// and mosquitto's broker accepts; each must be accepted and a QoS 1 publish on it
// stored. 3.1.1's one refusal here is an empty client id without clean session.
func TestConnectVariantsTheSpecAllows(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	h := in.http.As(tok)
	cases := []struct {
		name  string
		tweak func(c *packets.ConnectParams)
	}{
		{"password flag with 0 bytes", func(c *packets.ConnectParams) { c.PasswordFlag, c.Password = true, []byte{} }},
		{"empty client id, clean session", func(c *packets.ConnectParams) { c.ClientIdentifier = "" }},
		{"keep-alive 0", func(c *packets.ConnectParams) { c.Keepalive = 0 }},
		{"will with an empty payload, retained, QoS 2", func(c *packets.ConnectParams) {
			c.WillFlag, c.WillTopic, c.WillPayload, c.WillRetain, c.WillQos = true, "/v1.6/devices/w/x", []byte{}, true, 2
		}},
	}
	for _, v := range []byte{4, 5} {
		for i, tc := range cases {
			device := fmt.Sprintf("raw-%d-%d", v, i)
			conn, ack := dialRaw(t, in.addr, v, tok, tc.tweak)
			if ack.ReasonCode != 0 {
				t.Fatalf("v%d %s: CONNACK 0x%02x", v, tc.name, ack.ReasonCode)
			}
			if v == 5 && tc.name == "empty client id, clean session" && ack.Properties.AssignedClientID == "" {
				t.Fatalf("v5 empty client id: no assigned client id in the CONNACK")
			}
			conn.publish(t, 1, "/v1.6/devices/"+device+"/t", "7")
			if got := values(t, h, device, "t"); len(got) != 1 || got[0]["value"] != 7.0 {
				t.Fatalf("v%d %s: publish not stored after its PUBACK: %v", v, tc.name, got)
			}
			conn.close(t)
		}
	}
	_, ack := dialRaw(t, in.addr, 4, tok, func(c *packets.ConnectParams) { c.ClientIdentifier, c.Clean = "", false })
	if ack.ReasonCode != packets.Err3ClientIdentifierNotValid.Code {
		t.Fatalf("3.1.1 empty client id without clean session: CONNACK 0x%02x, want 0x02", ack.ReasonCode)
	}
}

// TestQoS0PublishStored: a QoS 0 publish has no acknowledgement, but is written.
func TestQoS0PublishStored(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	host, port := hostPort(in.addr)
	if out, err := mosquitto(t, "", "mosquitto_pub", "-h", host, "-p", port, "-u", tok, "-P", "", "-q", "0",
		"-t", "/v1.6/devices/q0/t", "-m", "4.25"); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	waitValues(t, in.http.As(tok), "q0", "t", func(v []map[string]any) bool { return len(v) == 1 && v[0]["value"] == 4.25 })
}

// TestWillWrittenWhenTheConnectionDrops: a will is written as the client's own publish
// when its connection ends without DISCONNECT (MQTT 5: also with reason 0x04), not
// after a clean DISCONNECT; an invalid will (an empty payload) writes nothing.
func TestWillWrittenWhenTheConnectionDrops(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	h := in.http.As(tok)
	withWill := func(topic, payload string) func(c *packets.ConnectParams) {
		return func(c *packets.ConnectParams) {
			c.WillFlag, c.WillTopic, c.WillPayload, c.WillQos = true, topic, []byte(payload), 1
		}
	}
	for _, v := range []byte{4, 5} {
		dropped := fmt.Sprintf("will-dropped-%d", v)
		conn, _ := dialRaw(t, in.addr, v, tok, withWill("/v1.6/devices/"+dropped+"/online", "0"))
		_ = conn.c.Close() // no DISCONNECT
		waitValues(t, h, dropped, "online", func(x []map[string]any) bool { return len(x) == 1 && x[0]["value"] == 0.0 })

		clean := fmt.Sprintf("will-clean-%d", v)
		conn, _ = dialRaw(t, in.addr, v, tok, withWill("/v1.6/devices/"+clean+"/online", "0"))
		conn.publish(t, 1, "/v1.6/devices/"+clean+"/online", "1")
		conn.close(t)
		empty := fmt.Sprintf("will-empty-%d", v)
		conn, _ = dialRaw(t, in.addr, v, tok, withWill("/v1.6/devices/"+empty+"/online", ""))
		conn.publish(t, 1, "/v1.6/devices/"+empty+"/seen", "1")
		_ = conn.c.Close()
		time.Sleep(time.Second) // a will, if wrongly written, would be visible by now
		if x := values(t, h, clean, "online"); len(x) != 1 || x[0]["value"] != 1.0 {
			t.Fatalf("v%d: will written after a clean DISCONNECT: %v", v, x)
		}
		if x := values(t, h, empty, "online"); len(x) != 0 {
			t.Fatalf("v%d: empty will written: %v", v, x)
		}
	}
	withReason := fmt.Sprintf("will-reason-%d", 5)
	conn, _ := dialRaw(t, in.addr, 5, tok, withWill("/v1.6/devices/"+withReason+"/online", "0"))
	conn.send(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect},
		ReasonCode: packets.CodeDisconnectWillMessage.Code})
	waitValues(t, h, withReason, "online", func(x []map[string]any) bool { return len(x) == 1 && x[0]["value"] == 0.0 })
}

// waitValues polls a variable's values over HTTP until ok, for up to 5 s.
func waitValues(t *testing.T, c *testenv.Client, device, variable string, ok func([]map[string]any) bool) {
	t.Helper()
	var v []map[string]any
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if v = values(t, c, device, variable); ok(v) {
			return
		}
	}
	t.Fatalf("%s/%s: %v", device, variable, v)
}

// rawConn is an MQTT connection driven packet by packet.
type rawConn struct {
	c       net.Conn
	r       *bufio.Reader
	version byte
	id      uint16
}

// dialRaw connects with the token as username and returns the connection and its
// CONNACK; tweak changes the CONNECT before it is encoded.
func dialRaw(t *testing.T, addr string, version byte, tok string, tweak func(*packets.ConnectParams)) (*rawConn, packets.Packet) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawConn{c: c, r: bufio.NewReader(c), version: version}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: version,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30,
			ClientIdentifier: fmt.Sprintf("raw-%d", time.Now().UnixNano()), UsernameFlag: true, Username: []byte(tok)}}
	tweak(&pk.Connect)
	rc.send(t, pk)
	return rc, rc.read(t, packets.Connack)
}

func (rc *rawConn) send(t *testing.T, pk packets.Packet) {
	t.Helper()
	pk.ProtocolVersion = rc.version
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(&buf)
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Disconnect:
		err = pk.DisconnectEncode(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// read reads the next packet, which must be of the given type.
func (rc *rawConn) read(t *testing.T, want byte) packets.Packet {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hb, err := rc.r.ReadByte()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	pk := packets.Packet{ProtocolVersion: rc.version}
	if err := pk.FixedHeader.Decode(hb); err != nil {
		t.Fatal(err)
	}
	n, _, err := packets.DecodeLength(rc.r)
	if err != nil {
		t.Fatal(err)
	}
	pk.FixedHeader.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		t.Fatal(err)
	}
	if pk.FixedHeader.Type != want {
		t.Fatalf("packet type %d, want %d", pk.FixedHeader.Type, want)
	}
	switch want {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Puback:
		err = pk.PubackDecode(body)
	case packets.Disconnect:
		err = pk.DisconnectDecode(body)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// publish sends a publish at qos and, at QoS 1, waits for a successful PUBACK.
func (rc *rawConn) publish(t *testing.T, qos byte, topic, payload string) {
	t.Helper()
	rc.id++
	rc.send(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, PacketID: rc.id,
		TopicName: topic, Payload: []byte(payload)})
	if qos == 1 {
		if ack := rc.read(t, packets.Puback); ack.ReasonCode != 0 || ack.PacketID != rc.id {
			t.Fatalf("PUBACK %d 0x%02x", ack.PacketID, ack.ReasonCode)
		}
	}
}

// close sends DISCONNECT and closes the connection.
func (rc *rawConn) close(t *testing.T) {
	t.Helper()
	rc.send(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}})
	_ = rc.c.Close()
}
