package mqtt

import (
	"errors"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// CONNECT packets are adjusted before mochi validates them, so that every CONNECT
// that MQTT 3.1.1 and 5.0 allow, and that mosquitto's broker accepts, is accepted here
// too (docs/mqtt.md lists what was tried). mochi refuses two of them:
//   - the password flag set with a zero-length password (MQTT-3.1.3.5 allows 0 bytes;
//     Arduino's PubSubClient sends it for connect(id, token, "")). The password is
//     ignored (API.md §12), so the flag is cleared.
//   - a will with an empty payload (MQTT-3.1.3.4 allows 0 bytes), and wills with the
//     retain flag or QoS 2, which this broker's capabilities turn away.
// Wills are taken out of mochi's hands altogether: mochi would route a will through its
// own topic tree, past the account boundary of API.md §12. Here a will is what the
// client would have published itself: written through the pipeline when the connection
// ends without a DISCONNECT (see writeWill).

// errClientID is 3.1.1's answer to an empty client id without clean session
// (MQTT-3.1.3-8: return code 2, identifier rejected); mochi would answer 0x80, which
// is not a 3.1.1 return code.
var errClientID = errors.New("mqtt: an empty client id needs a clean session")

// OnPacketRead adjusts a CONNECT before mochi validates it (mochi calls it for the
// first packet too); other packets pass unchanged.
func (h *hook) OnPacketRead(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type != packets.Connect {
		return pk, nil
	}
	c := &pk.Connect
	if c.PasswordFlag && len(c.Password) == 0 {
		c.PasswordFlag = false
	}
	if pk.ProtocolVersion < 5 && !c.Clean && c.ClientIdentifier == "" {
		_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack},
			ReasonCode: packets.Err3ClientIdentifierNotValid.Code})
		return pk, errClientID
	}
	if c.WillFlag {
		// kept in mochi's own field with its flag off: mochi never sends it, and it
		// goes with the client (a refused CONNECT leaves nothing behind)
		cl.Properties.Will = mochi.Will{TopicName: c.WillTopic, Payload: c.WillPayload}
		c.WillFlag, c.WillRetain, c.WillQos = false, false, 0
		c.WillTopic, c.WillPayload, c.WillProperties = "", nil, packets.Properties{}
	}
	return pk, nil
}

// writeWill writes a will as a publish of its client, once the connection has ended
// without a DISCONNECT (or with MQTT 5's "disconnect with will message"). A will that
// is not a valid publish is logged and counted like one.
func (b *Broker) writeWill(s *session, cause error) {
	w := s.cl.Properties.Will
	if w.TopicName == "" || cause == nil || errors.Is(cause, packets.ErrServerShuttingDown) {
		return
	}
	cl := s.cl
	err := b.write(s, w.TopicName, w.Payload)
	if err == nil {
		b.Metrics.MQTTMessagesIn.Inc()
		return
	}
	reason, _ := classify(err)
	b.Metrics.MQTTRejected.WithLabelValues(reason).Inc()
	b.Log.Info("mqtt will not written", "client", cl.ID, "topic", w.TopicName, "reason", reason, "error", firstError(err))
}
