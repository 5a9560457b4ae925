# Totals the test runners' own closing lines in a `make test` log:
#   cargo:        "test result: ok. 12 passed; 0 failed; 0 ignored; ..."
#   any other:    "<name>: 580 passed, 0 failed" (conformance, ts, ...)
# and prints one plain line, "total: N passed, N failed".
/^test result: / {
    for (i = 1; i <= NF; i++) {
        if ($i ~ /^passed;?$/) passed += $(i - 1)
        if ($i ~ /^failed;?$/) failed += $(i - 1)
    }
}
/^[a-z][a-z0-9 _-]*: [0-9]+ passed, [0-9]+ failed$/ && $1 != "total:" {
    passed += $(NF - 3)
    failed += $(NF - 1)
}
END {
    if (passed + failed == 0) { print "total: no tests ran"; exit 1 }
    printf "total: %d passed, %d failed\n", passed, failed
    exit (failed > 0)
}
