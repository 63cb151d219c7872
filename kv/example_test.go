package kv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
)

// One operation is one transaction: everything it writes commits together
// or not at all, and Update returns only after the commit is durable. Here
// on the embedded engine, a bbolt file; PostgreSQL implements the same
// contract.
func Example() {
	dir, _ := os.MkdirTemp("", "kv-example")
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "example.db"), bolt.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()

	// A write and its record commit together.
	err = db.Update(ctx, func(tx kv.Tx) error {
		n, err := tx.NextSequence("orders")
		if err != nil {
			return err
		}
		if err := tx.Put("orders", kv.Join([]byte("patient_42"), kv.U64(n)), []byte("apixaban 5 mg")); err != nil {
			return err
		}
		return tx.Put("log", kv.U64(n), []byte("ordered for patient_42"))
	})
	fmt.Println("committed:", err)

	// A function that fails leaves nothing behind.
	err = db.Update(ctx, func(tx kv.Tx) error {
		if err := tx.Put("orders", kv.Join([]byte("patient_42"), kv.U64(99)), []byte("warfarin")); err != nil {
			return err
		}
		return fmt.Errorf("the dose is out of range")
	})
	fmt.Println("rolled back:", err)

	// A prefix scan reads one patient's orders, in key order.
	_ = db.View(ctx, func(tx kv.Tx) error {
		return kv.Prefix(tx, "orders", append([]byte("patient_42"), 0), func(k, v []byte) error {
			fmt.Printf("order %d: %s\n", kv.ParseU64(k[len("patient_42")+1:]), v)
			return nil
		})
	})
	// Output:
	// committed: <nil>
	// rolled back: the dose is out of range
	// order 1: apixaban 5 mg
}
