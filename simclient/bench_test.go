package simclient_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a request costs through the in-memory transport: a typed Get of a
// ConfigMap and an Update of it.
func BenchmarkClientsetGetUpdate(b *testing.B) {
	ctx := context.Background()
	_, _, cs := newServer(b, 1)
	cms := cs.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		cm, err := cms.Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cm.Data = map[string]string{"i": string(rune('a' + i%26))}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
