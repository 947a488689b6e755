/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/sandbox/test_runner_blob.c - the sluice-run executable embedded in sl_sandbox
 * (control/sandbox/runner_blob.h): a non-empty ELF executable with no program interpreter
 * (statically linked, so it runs in any image), and, when SLUICE_RUNNER names the built file,
 * exactly its bytes (the embedded copy is not stale).
 */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/sandbox/runner_blob.h"

static void blob_is_an_elf_executable(void **state)
{
    (void)state;
    assert_true(sl_runner_blob_len > sizeof(Elf64_Ehdr));
    assert_memory_equal(sl_runner_blob, ELFMAG, SELFMAG);
    assert_int_equal(sl_runner_blob[EI_CLASS], ELFCLASS64);
}

static void blob_has_no_program_interpreter(void **state)
{
    Elf64_Ehdr eh;

    (void)state;
    memcpy(&eh, sl_runner_blob, sizeof(eh));
    /* ET_EXEC: not position-independent, so no loader is needed to relocate it either. */
    assert_int_equal(eh.e_type, ET_EXEC);
    assert_int_equal(eh.e_phentsize, sizeof(Elf64_Phdr));
    assert_true(eh.e_phnum > 0);
    assert_true(eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) <= sl_runner_blob_len);
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;

        memcpy(&ph, sl_runner_blob + eh.e_phoff + i * sizeof(ph), sizeof(ph));
        assert_int_not_equal(ph.p_type, PT_INTERP);
        assert_int_not_equal(ph.p_type, PT_DYNAMIC);
    }
}

static void blob_matches_the_built_runner(void **state)
{
    const char *path = getenv("SLUICE_RUNNER");
    unsigned char *file;
    FILE *f;
    size_t n;

    (void)state;
    if (path == NULL) {
        skip();
    }
    f = fopen(path, "rb");
    assert_non_null(f);
    file = test_malloc(sl_runner_blob_len + 1);
    n = fread(file, 1, sl_runner_blob_len + 1, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(n, sl_runner_blob_len);
    assert_memory_equal(file, sl_runner_blob, sl_runner_blob_len);
    test_free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blob_is_an_elf_executable),
        cmocka_unit_test(blob_has_no_program_interpreter),
        cmocka_unit_test(blob_matches_the_built_runner),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
