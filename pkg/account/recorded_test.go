package account

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// TestRecordedRoundTrip: a recorded result read back (FromRecorded) and recorded again
// (Recorded) is the same record, field for field: a field added to RecordedResult and
// not carried by Result fails here, instead of being lost by every reader of the chunks.
func TestRecordedRoundTrip(t *testing.T) {
	var want v1alpha1.RecordedResult
	v := reflect.ValueOf(&want).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Struct:
			if f.Type() != reflect.TypeOf(metav1.Time{}) {
				t.Fatalf("field %s of type %s: teach this test to fill it", v.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 12, 3, 23, 50, 0, 0, time.UTC))))
		default:
			t.Fatalf("field %s of kind %s: teach this test to fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
	got := FromRecorded(want).Recorded(int(want.Ordinal), want.RecordedAt)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("round trip lost fields:\n got %+v\nwant %+v", got, want)
	}
}
