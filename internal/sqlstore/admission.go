package sqlstore

import (
	"encoding/json"

	"github.com/seckill-dev/seckill"
)

// encodeAdmission is a's stored form: "" for first come, else its JSON.
func encodeAdmission(a seckill.Admission) string {
	if a.FirstCome() {
		return ""
	}
	b, _ := json.Marshal(a) // plain fields: it cannot fail
	return string(b)
}

// decodeAdmission reads encodeAdmission's form. First come is the zero
// Admission, however it was written.
func decodeAdmission(s string) (seckill.Admission, error) {
	var a seckill.Admission
	if s == "" {
		return a, nil
	}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return seckill.Admission{}, seckill.Errorf(seckill.EINVALID, "admission: %v", err)
	}
	a.EntriesCloseAt = a.EntriesCloseAt.UTC()
	if a.FirstCome() {
		return seckill.Admission{}, nil
	}
	return a, nil
}
