"""What the tests/io scripts share: named checks that print ok / FAIL and are counted."""

FAILED = []


def expect(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILED.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "))
