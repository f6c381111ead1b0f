"""The seed's examples, as the docstrings of crmm.pylibrmm.device_buffer carry them (only
`import crmm as rmm` changed), must print exactly what the seed shows."""

import doctest

import crmm.pylibrmm.device_buffer


def test_seed_examples(gpu):
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=0)
    tests = [t for t in finder.find(crmm.pylibrmm.device_buffer) if t.examples]
    names = {t.name.rsplit(".", 1)[-1] for t in tests}
    assert {"copy_device_to_ptr", "copy_host_to_ptr", "copy_ptr_to_host", "to_device"} <= names
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed (output above)"
    assert result.attempted >= 20
