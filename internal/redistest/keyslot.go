package redistest

import "strings"

// KeySlot returns the Redis Cluster hash slot of key (0 to 16383), as CLUSTER KEYSLOT
// computes it: CRC16 (XMODEM) modulo 16384 of the key's hash tag, the part between the first
// '{' and the first '}' after it, if that part is non-empty; of the whole key otherwise.
// Shard channels (SPUBLISH, SSUBSCRIBE) hash the same way.
func KeySlot(key string) int { return int(crc16(HashTag(key)) % clusterSlots) }

// HashTag returns the part of key that KeySlot hashes: its hash tag, or key itself when its
// tag is missing or empty.
func HashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
