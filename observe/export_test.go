package observe

import "time"

// OpenConns returns the number of connections s has open.
func OpenConns(s *Server) int { return s.conns.open() }

// WriteTimeout returns the write timeout s serves with.
func WriteTimeout(s *Server) time.Duration { return s.srv.WriteTimeout }
