package redlock

// HashSlot is hashSlot, for the external tests.
func HashSlot(key string) int { return int(hashSlot(key)) }
