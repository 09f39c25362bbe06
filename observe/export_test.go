package observe

// OpenConns returns the number of connections s has open.
func OpenConns(s *Server) int { return s.conns.open() }
