// SPDX-License-Identifier: Apache-2.0
/* lib/cli.c: option names in error messages. */
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/cli/cli_gpu.h"
#include "lib/cli.h"

static const struct option longopts[] = {
	{ "freq", required_argument, NULL, 'F' },
	{ "max-stacks", required_argument, NULL, 'S' },
	CLI_GPU_LONGOPTS,
	{},
};

static void test_long_name_preferred(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(cli_option_name('S', longopts, buf, sizeof(buf)), "--max-stacks");
	assert_string_equal(cli_option_name(CLI_GPU_BUDGET, longopts, buf, sizeof(buf)),
			    "--probe-budget");
	assert_string_equal(cli_option_name(CLI_GPU_PROBE_MODE, longopts, buf, sizeof(buf)),
			    "--gpu-probe-mode");
}

static void test_short_only_and_unknown(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(cli_option_name('d', longopts, buf, sizeof(buf)), "-d");
	assert_string_equal(cli_option_name(0x2000, longopts, buf, sizeof(buf)), "option 8192");
	assert_string_equal(cli_option_name('x', NULL, buf, sizeof(buf)), "-x");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_long_name_preferred),
		cmocka_unit_test(test_short_only_and_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
