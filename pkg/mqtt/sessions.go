package mqtt

import (
	"maps"
	"slices"
	"sync"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// outboundQueue is how many deliveries may wait for one slow subscriber; past it the
// subscriber is disconnected (it gets the current values again when it resubscribes)
// rather than holding the instance's notifications up.
const outboundQueue = 1024

// session is an authenticated connection and the subscriptions it holds.
type session struct {
	cl      *mochi.Client
	account int64
	token   string // to check it again after a gap in notifications; never logged

	mu        sync.Mutex
	closed    bool
	out       chan packets.Packet // deliveries, written in order by one goroutine
	filters   map[string]filter   // by the filter as subscribed
	delivered map[delivery]sent   // newest value sent per filter and variable
	pending   map[uint16][]string // filters waiting for their SUBACK to be sent
}

// delivery identifies one variable seen through one subscription.
type delivery struct {
	filter, device, variable string
}

// sent is the last value a subscription got for a variable.
type sent struct {
	timestamp int64
	payload   string
}

func newSession(cl *mochi.Client, account int64, token string) *session {
	s := &session{cl: cl, account: account, token: token, out: make(chan packets.Packet, outboundQueue),
		filters: map[string]filter{}, delivered: map[delivery]sent{}, pending: map[uint16][]string{}}
	go s.write()
	return s
}

// write sends queued deliveries until the session closes.
func (s *session) write() {
	for pk := range s.out {
		if err := s.cl.WritePacket(pk); err != nil {
			s.cl.Stop(err)
			for range s.out { // drain until close
			}
			return
		}
	}
}

// subscribe records accepted filters; their initial values wait for the SUBACK. It
// tells whether the session now listens (holds a filter).
func (s *session) subscribe(packetID uint16, filters []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range filters {
		if p, ok := parseFilter(f); ok {
			s.filters[f] = p
		}
	}
	s.pending[packetID] = filters
	return len(s.filters) > 0
}

// subscribed lists the session's filters.
func (s *session) subscribed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.filters))
}

// acked returns the filters whose SUBACK was just sent.
func (s *session) acked(packetID uint16) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.pending[packetID]
	delete(s.pending, packetID)
	return f
}

// unsubscribe forgets filters; it tells whether the session still listens.
func (s *session) unsubscribe(filters []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range filters {
		delete(s.filters, f)
		for k := range s.delivered {
			if k.filter == f {
				delete(s.delivered, k)
			}
		}
	}
	return len(s.filters) > 0
}

// offer queues v on every subscription of the session that matches it (only those
// named in only, when given), unless a newer value, or this same one, went out there
// already (a subscription's initial read and a notification may bring the same value).
// It tells how many packets were queued, and false when the subscriber cannot keep up.
func (s *session) offer(v lastValue, only ...string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for name, f := range s.filters {
		if s.closed || !f.matches(v.Device, v.Variable) || (len(only) > 0 && !slices.Contains(only, name)) {
			continue
		}
		k := delivery{name, v.Device, v.Variable}
		now := sent{v.Timestamp, string(f.payload(v))}
		if last, ok := s.delivered[k]; ok && (now.timestamp < last.timestamp || now == last) {
			continue
		}
		s.delivered[k] = now
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: f.topic(v.Device, v.Variable),
			Payload: []byte(now.payload)}
		select {
		case s.out <- pk:
			n++
		default:
			return n, false
		}
	}
	return n, true
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.out)
	}
}

// sessions index the instance's connections by client, and those that hold a
// subscription by account: every last-value notification looks its account's
// listeners up (a fleet's publishing connections, which subscribe to nothing, cost it
// nothing: walking every session for every notification was 7% of the service's CPU
// under make bench-mqtt).
type sessions struct {
	mu        sync.RWMutex
	byClient  map[*mochi.Client]*session
	listening map[int64]map[*session]struct{}
}

func newSessions() *sessions {
	return &sessions{byClient: map[*mochi.Client]*session{}, listening: map[int64]map[*session]struct{}{}}
}

// add indexes a new session; listens: it holds a subscription already (resumed).
func (ss *sessions) add(s *session, listens bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.byClient[s.cl] = s
	ss.listen(s, listens)
}

// setListening records whether the session holds a subscription.
func (ss *sessions) setListening(s *session, listens bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.byClient[s.cl] == s { // not closed meanwhile
		ss.listen(s, listens)
	}
}

func (ss *sessions) listen(s *session, listens bool) {
	set := ss.listening[s.account]
	switch {
	case listens && set == nil:
		ss.listening[s.account] = map[*session]struct{}{s: {}}
	case listens:
		set[s] = struct{}{}
	case set != nil:
		delete(set, s)
		if len(set) == 0 {
			delete(ss.listening, s.account)
		}
	}
}

func (ss *sessions) get(cl *mochi.Client) *session {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return ss.byClient[cl]
}

// remove forgets the client's session and returns it (nil if it had none).
func (ss *sessions) remove(cl *mochi.Client) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byClient[cl]
	if s == nil {
		return nil
	}
	delete(ss.byClient, cl)
	ss.listen(s, false)
	return s
}

// all lists every session.
func (ss *sessions) all() []*session {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return slices.Collect(maps.Values(ss.byClient))
}

// anyListening tells whether some session holds a subscription.
func (ss *sessions) anyListening() bool {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return len(ss.listening) > 0
}

// listeners lists the account's sessions that hold a subscription.
func (ss *sessions) listeners(account int64) []*session {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	set := ss.listening[account]
	if len(set) == 0 {
		return nil
	}
	return slices.Collect(maps.Keys(set))
}
