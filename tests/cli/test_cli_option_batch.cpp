// add_options_in_batch (cli/option_batch.h): the options a batch adds land behind the earlier
// ones in registration order, a name shared with an earlier option is refused as CLI11 refuses
// it, and an exception inside a batch leaves the earlier options in place.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../cli/option_batch.h"

namespace {

using kvsim::cli::add_options_in_batch;

std::vector<std::string> names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) out.push_back(o->get_name());
  return out;
}

TEST(CliOptionBatch, KeepsRegistrationOrderAndParses) {
  CLI::App app{"t"};
  int a = 0;
  int b = 0;
  bool c = false;
  std::string pos;
  app.add_option("pos", pos);
  add_options_in_batch(app, [&] { app.add_option("--alpha,-a", a); });
  add_options_in_batch(app, [&] {
    app.add_option("--beta", b);
    app.add_flag("--gamma", c);
  });
  EXPECT_EQ(names(app),
            (std::vector<std::string>{"--help", "pos", "--alpha", "--beta", "--gamma"}));
  std::vector<std::string> args = {"--gamma", "--beta", "7", "-a", "3", "file"};
  std::reverse(args.begin(), args.end());
  app.parse(args);
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 7);
  EXPECT_TRUE(c);
  EXPECT_EQ(pos, "file");
}

TEST(CliOptionBatch, RefusesANameAnEarlierOptionHas) {
  CLI::App app{"t"};
  int a = 0;
  int b = 0;
  app.add_option("--alpha,-a", a);
  EXPECT_THROW(add_options_in_batch(app, [&] { app.add_option("--other,-a", b); }),
               CLI::OptionAlreadyAdded);
  EXPECT_THROW(add_options_in_batch(app, [&] { app.add_option("--alpha", b); }),
               CLI::OptionAlreadyAdded);
  EXPECT_THROW(add_options_in_batch(app, [&] { app.add_flag("--help"); }), CLI::OptionAlreadyAdded);
  // Inside one batch CLI11 itself refuses the second.
  EXPECT_THROW(add_options_in_batch(app,
                                    [&] {
                                      app.add_option("--x", a);
                                      app.add_option("--x", b);
                                    }),
               CLI::OptionAlreadyAdded);
  // The earlier options are all still there, first, and a refused batch added nothing.
  const std::vector<std::string> after = names(app);
  ASSERT_GE(after.size(), 2u);
  EXPECT_EQ(after[0], "--help");
  EXPECT_EQ(after[1], "--alpha");
  EXPECT_EQ(app.get_option_no_throw("--other"), nullptr);
}

TEST(CliOptionBatch, AnExceptionInsideLeavesTheEarlierOptions) {
  CLI::App app{"t"};
  int a = 0;
  app.add_option("--alpha", a);
  EXPECT_THROW(add_options_in_batch(app,
                                    [&] {
                                      app.add_option("--beta", a);
                                      throw std::runtime_error("registration failed");
                                    }),
               std::runtime_error);
  EXPECT_EQ(names(app), (std::vector<std::string>{"--help", "--alpha", "--beta"}));
  EXPECT_NE(app.get_option_no_throw("--alpha"), nullptr);
}

}  // namespace
