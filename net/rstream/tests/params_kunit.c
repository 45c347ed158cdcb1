// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for rstream's module parameters: the defaults are rsocket's,
 * every default lies in its own range, and rstream_param_parse() accepts
 * exactly the in-range integers.
 */
#include <kunit/test.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/socket.h>
#include <linux/rstream.h>

#include "../rstream.h"

/*
 * The values rsocket(7) uses (librdmacm rsocket.c), our family, and no
 * memory limit of our own choosing (0: a quarter of the RAM).
 */
static void rstream_param_defaults_test(struct kunit *test)
{
	static const struct {
		enum rstream_param_id id;
		const char *name;
		unsigned int dflt;
	} expected[] = {
		{ RSTREAM_PARAM_FAMILY, "family", AF_RSTREAM },
		{ RSTREAM_PARAM_MEM, "mem_default", 131072 },
		{ RSTREAM_PARAM_WMEM, "wmem_default", 131072 },
		{ RSTREAM_PARAM_SQSIZE, "sqsize_default", 64 },
		{ RSTREAM_PARAM_RQSIZE, "rqsize_default", 128 },
		{ RSTREAM_PARAM_INLINE, "inline_default", 64 },
		{ RSTREAM_PARAM_MEM_LIMIT, "mem_limit", 0 },
		{ RSTREAM_PARAM_POLLING_TIME, "polling_time", 0 },
	};
	unsigned int i;

	KUNIT_ASSERT_EQ(test, ARRAY_SIZE(expected), RSTREAM_PARAM_COUNT);
	KUNIT_EXPECT_EQ(test, AF_RSTREAM, 22);
	for (i = 0; i < ARRAY_SIZE(expected); i++) {
		const struct rstream_param *p = &rstream_params[expected[i].id];

		KUNIT_EXPECT_STREQ(test, p->name, expected[i].name);
		KUNIT_EXPECT_EQ_MSG(test, p->dflt, expected[i].dflt, "%s", p->name);
	}
}

/* A default outside its own range could never be written back. */
static void rstream_param_default_in_range_test(struct kunit *test)
{
	unsigned int i, v;
	char buf[16];

	for (i = 0; i < RSTREAM_PARAM_COUNT; i++) {
		const struct rstream_param *p = &rstream_params[i];

		KUNIT_EXPECT_LE_MSG(test, p->min, p->dflt, "%s", p->name);
		KUNIT_EXPECT_GE_MSG(test, p->max, p->dflt, "%s", p->name);
		snprintf(buf, sizeof(buf), "%u", p->dflt);
		KUNIT_EXPECT_EQ_MSG(test, rstream_param_parse(p, buf, &v), 0,
				    "%s", p->name);
		KUNIT_EXPECT_EQ_MSG(test, v, p->dflt, "%s", p->name);
	}
}

/*
 * The family may only be a number no Linux socket family implements or
 * otherwise uses, and its message text lists exactly those.
 */
static void rstream_param_family_choices_test(struct kunit *test)
{
	static const unsigned int free_families[] = {
		4, 12, 13, 18, 19, 22, 23, 25
	};
	const struct rstream_param *p = &rstream_params[RSTREAM_PARAM_FAMILY];
	unsigned int family, i, v;
	char buf[64] = "";
	bool free;

	for (family = 0; family <= AF_MAX + 1; family++) {
		free = false;
		for (i = 0; i < ARRAY_SIZE(free_families); i++)
			free |= family == free_families[i];
		snprintf(buf, sizeof(buf), "%u", family);
		KUNIT_EXPECT_EQ_MSG(test, rstream_param_parse(p, buf, &v),
				    free ? 0 : -EINVAL, "family=%u", family);
	}
	KUNIT_EXPECT_STREQ(test, p->only_text, "4, 12, 13, 18, 19, 22, 23, 25");
	for (i = 0; i < ARRAY_SIZE(free_families); i++)
		KUNIT_EXPECT_LT(test, free_families[i], (unsigned int)AF_MAX);
}

/* Every value just inside and just outside each range. */
static void rstream_param_range_edges_test(struct kunit *test)
{
	unsigned int i, v;
	char buf[16];

	for (i = 0; i < RSTREAM_PARAM_COUNT; i++) {
		const struct rstream_param *p = &rstream_params[i];

		snprintf(buf, sizeof(buf), "%u", p->min);
		KUNIT_EXPECT_EQ_MSG(test, rstream_param_parse(p, buf, &v), 0,
				    "%s=%s", p->name, buf);
		KUNIT_EXPECT_EQ(test, v, p->min);
		snprintf(buf, sizeof(buf), "%u", p->max);
		KUNIT_EXPECT_EQ_MSG(test, rstream_param_parse(p, buf, &v), 0,
				    "%s=%s", p->name, buf);
		KUNIT_EXPECT_EQ(test, v, p->max);

		/* Below the range: -1 when it starts at 0. */
		if (p->min)
			snprintf(buf, sizeof(buf), "%u", p->min - 1);
		else
			snprintf(buf, sizeof(buf), "-1");
		v = 12345;
		KUNIT_EXPECT_EQ_MSG(test, rstream_param_parse(p, buf, &v),
				    -EINVAL, "%s=%s", p->name, buf);
		KUNIT_EXPECT_EQ_MSG(test, v, 12345U, "%s: output written on error",
				    p->name);
		KUNIT_ASSERT_LT(test, p->max, UINT_MAX);
		snprintf(buf, sizeof(buf), "%u", p->max + 1);
		KUNIT_EXPECT_EQ_MSG(test, rstream_param_parse(p, buf, &v),
				    -EINVAL, "%s=%s", p->name, buf);
	}
}

struct rstream_parse_case {
	const char *text;
	int err;
	unsigned int value;
};

/* Parsed against sqsize_default's range, 16..65534. */
static const struct rstream_parse_case rstream_parse_cases[] = {
	{ "384", 0, 384 },
	{ "384\n", 0, 384 },		/* sysfs writes end in a newline */
	{ "0x180", 0, 384 },		/* base 0, as param_set_uint() */
	{ "0600", 0, 384 },
	{ "+384", 0, 384 },
	{ "", -EINVAL, 0 },
	{ "\n", -EINVAL, 0 },
	{ "abc", -EINVAL, 0 },
	{ "384abc", -EINVAL, 0 },
	{ "38 4", -EINVAL, 0 },
	{ " 384", -EINVAL, 0 },
	{ "384\n\n", -EINVAL, 0 },
	{ "-1", -EINVAL, 0 },
	{ "-384", -EINVAL, 0 },
	{ "4294967296", -EINVAL, 0 },	/* overflows 32 bits */
	{ "99999999999999999999", -EINVAL, 0 },
	{ "65535", -EINVAL, 0 },
	{ "15", -EINVAL, 0 },
	{ "0", -EINVAL, 0 },
};

static void rstream_parse_case_desc(const struct rstream_parse_case *c,
				    char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "\"%*pE\"", (int)strlen(c->text),
		 c->text);
}

KUNIT_ARRAY_PARAM(rstream_parse, rstream_parse_cases, rstream_parse_case_desc);

static void rstream_param_parse_text_test(struct kunit *test)
{
	const struct rstream_parse_case *c = test->param_value;
	const struct rstream_param *p = &rstream_params[RSTREAM_PARAM_SQSIZE];
	unsigned int v = 7;

	KUNIT_EXPECT_EQ(test, rstream_param_parse(p, c->text, &v), c->err);
	KUNIT_EXPECT_EQ(test, v, c->err ? 7 : c->value);
}

static struct kunit_case rstream_params_test_cases[] = {
	KUNIT_CASE(rstream_param_defaults_test),
	KUNIT_CASE(rstream_param_default_in_range_test),
	KUNIT_CASE(rstream_param_family_choices_test),
	KUNIT_CASE(rstream_param_range_edges_test),
	KUNIT_CASE_PARAM(rstream_param_parse_text_test, rstream_parse_gen_params),
	{}
};

static struct kunit_suite rstream_params_test_suite = {
	.name = "rstream_params",
	.test_cases = rstream_params_test_cases,
};

kunit_test_suite(rstream_params_test_suite);

/* The module's tags, once for all the suites linked into rstream_kunit.ko */
MODULE_DESCRIPTION("KUnit tests for AF_RSTREAM");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
