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

// subscribe records accepted filters; their initial values wait for the SUBACK.
func (s *session) subscribe(packetID uint16, filters []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range filters {
		if p, ok := parseFilter(f); ok {
			s.filters[f] = p
		}
	}
	s.pending[packetID] = filters
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

func (s *session) unsubscribe(filters []string) {
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

// sessions index the instance's connections by client and by account.
type sessions struct {
	mu        sync.RWMutex
	byClient  map[*mochi.Client]*session
	byAccount map[int64]map[*session]struct{}
}

func newSessions() *sessions {
	return &sessions{byClient: map[*mochi.Client]*session{}, byAccount: map[int64]map[*session]struct{}{}}
}

func (ss *sessions) add(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.byClient[s.cl] = s
	if ss.byAccount[s.account] == nil {
		ss.byAccount[s.account] = map[*session]struct{}{}
	}
	ss.byAccount[s.account][s] = struct{}{}
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
	delete(ss.byAccount[s.account], s)
	if len(ss.byAccount[s.account]) == 0 {
		delete(ss.byAccount, s.account)
	}
	return s
}

// empty tells whether the instance holds no session at all.
func (ss *sessions) empty() bool {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return len(ss.byClient) == 0
}

// of lists an account's sessions (all of them when account is 0).
func (ss *sessions) of(account int64) []*session {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	var out []*session
	for a, set := range ss.byAccount {
		if account != 0 && a != account {
			continue
		}
		for s := range set {
			out = append(out, s)
		}
	}
	return out
}
