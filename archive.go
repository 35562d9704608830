package seckill

// ArchiveRecorded is what the database holds of an ended sale when its
// Redis keys are to be dropped: the keys may hold no more, or they stay.
type ArchiveRecorded struct {
	Reservations int64 // with an order or a failed order
	// Entries is a lottery's entries copied to the database, Winners those
	// of them with the reservation the draw gave.
	Entries, Winners int64
}

// LotteryArchiveWait says why a lottery sale's keys must stay for now
// ("" when they may go once its entries are copied): until its draw has
// finished, the entries are still to be drawn from, and the list the draw
// publishes is not final. drawFound is false when the sale has no draw
// record. Any other sale has no entries to wait for.
func LotteryArchiveWait(s *Sale, rec DrawRecord, drawFound bool) string {
	switch {
	case s.Admission.Of() != AdmitLottery:
		return ""
	case !drawFound:
		return "the lottery has no draw record"
	case !rec.Drawn():
		return "the lottery's draw has not finished"
	}
	return ""
}

// LotteryCounts is how many entries of a lottery a store holds, and how
// many of them won a reservation: Redis's entries and won hashes, or the
// database's copy.
type LotteryCounts struct{ Entries, Winners int64 }

// LotteryCopyNeeded says whether a drawn lottery's entries must be copied
// from Redis to the database (again): only while the database holds fewer
// entries or winners than Redis. Entries and wins are only ever added, one
// per buyer and never changed, so equal counts mean the same rows; reading
// and upserting them all on every pass would cost a whole lottery's rows a
// minute on every node while archiving is refused for another reason.
func LotteryCopyNeeded(inRedis, copied LotteryCounts) bool {
	return copied.Entries < inRedis.Entries || copied.Winners < inRedis.Winners
}
