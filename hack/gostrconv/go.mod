module kccm.io/hack/gostrconv

go 1.22
