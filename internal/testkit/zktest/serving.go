package zktest

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"time"
)

// Serving reports whether the ensemble takes writes: a server answers as
// leader (or standalone) and, with peers, has synchronised a quorum of
// them — mntr's zk_synced_followers counts the followers done with their
// first synchronisation, and a new leader serves once a quorum is. On a
// loaded machine a server answers as leader a second or more before
// that. Paused servers are not asked.
func (e *Ensemble) Serving() bool {
	i := e.Leader()
	if i < 0 {
		return false
	}
	if len(e.Servers) == 1 {
		return true
	}
	n, ok := e.Servers[i].syncedFollowers()
	return ok && n+1 > len(e.Servers)/2
}

// syncedFollowers asks the server how many followers it has
// synchronised as leader; ok is false when it does not say (not a
// leader, or no answer).
func (s *Server) syncedFollowers() (n int, ok bool) {
	v, ok := s.Stat("zk_synced_followers")
	return int(v), ok
}

// Stat returns the server's figure name (four-letter word mntr: for
// instance zk_packets_received, the client requests it received, session
// pings included); ok is false when it does not say (no answer, or no
// such figure).
func (s *Server) Stat(name string) (v int64, ok bool) {
	for _, line := range s.fourLetter("mntr") {
		if f, found := strings.CutPrefix(line, name+"\t"); found {
			v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// fourLetter sends the server the four-letter word w and returns the
// lines of its answer (none when it does not answer within a second).
func (s *Server) fourLetter(w string) []string {
	c, err := net.DialTimeout("tcp", s.Addr(), 500*time.Millisecond)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(w)); err != nil {
		return nil
	}
	var lines []string
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
