// The rank environment a process reads: torchrun-style variables, Slurm's, which wins, Slurm
// hostlists and tasks-per-node lists, and a ConfigError naming the variable for every malformed or
// inconsistent value. The lookup is a map, so no test touches the process environment.
#include <gtest/gtest.h>

#include <map>

#include "loco/comm/c10d/rank_environment.h"
#include "loco/util/error.h"

namespace loco::comm {
namespace {

using Variables = std::map<std::string, std::string>;

std::optional<RankEnvironment> from(const Variables& variables) {
  return rank_environment_from([&variables](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

// Expects a ConfigError whose message names `variable`.
void expect_error_naming(const Variables& variables, const std::string& variable) {
  try {
    from(variables);
    ADD_FAILURE() << "no error; expected one naming " << variable;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(variable), std::string::npos) << e.what();
  }
}

TEST(RankEnvironment, NoneWithoutLauncherVariables) {
  EXPECT_FALSE(from({}));
  EXPECT_FALSE(from({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "1234"}, {"LOCAL_RANK", "0"}}));
  // A Slurm batch script sees some Slurm variables but is not one task of several.
  EXPECT_FALSE(from({{"SLURM_PROCID", "0"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}));
  EXPECT_FALSE(from({{"SLURM_NTASKS", "4"}}));
}

TEST(RankEnvironment, ReadsTorchrunVariables) {
  auto e = from({{"RANK", "3"},
                 {"WORLD_SIZE", "8"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "node0"},
                 {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "node0");
  EXPECT_EQ(e->master_port, 1234);
  EXPECT_EQ(e->source, "RANK/WORLD_SIZE environment");
}

TEST(RankEnvironment, TorchrunDefaultsAssumeOneHost) {
  auto single = from({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(single);
  EXPECT_EQ(single->local_rank, 0);
  EXPECT_EQ(single->local_world_size, 1);
  EXPECT_EQ(single->master_addr, "127.0.0.1");
  EXPECT_EQ(single->master_port, 29500);

  auto by_hand = from({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}});
  ASSERT_TRUE(by_hand);
  EXPECT_EQ(by_hand->local_rank, 2);
  EXPECT_EQ(by_hand->local_world_size, 4);
}

TEST(RankEnvironment, ReadsSlurmVariables) {
  auto e = from({{"SLURM_PROCID", "5"},
                 {"SLURM_NTASKS", "8"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_NTASKS_PER_NODE", "4"},
                 {"SLURM_JOB_NODELIST", "gpu[07-08]"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->master_addr, "gpu07");
  EXPECT_EQ(e->master_port, 29500);
  EXPECT_EQ(e->source, "SLURM");
}

TEST(RankEnvironment, SlurmTasksPerNodeAndNodeListFallbacks) {
  // Uneven nodes: 3 tasks on node 0, 1 on node 1; this task is the only one on node 1.
  auto e = from({{"SLURM_PROCID", "3"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_TASKS_PER_NODE", "3,1"},
                 {"SLURM_NODELIST", "a,b"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->local_world_size, 1);
  EXPECT_EQ(e->master_addr, "a");

  e = from({{"SLURM_PROCID", "2"},
            {"SLURM_NTASKS", "4"},
            {"SLURM_LOCALID", "0"},
            {"SLURM_NODEID", "1"},
            {"SLURM_TASKS_PER_NODE", "2(x2)"},
            {"SLURM_JOB_NODELIST", "n[1-2]"},
            {"MASTER_ADDR", "head"},
            {"MASTER_PORT", "40000"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "head");  // MASTER_ADDR wins over the node list
  EXPECT_EQ(e->master_port, 40000);
}

TEST(RankEnvironment, TorchrunVariablesWinOverSlurm) {
  // `srun torchrun …`: the Slurm variables describe the torchrun agent, not this worker.
  auto e = from({{"RANK", "1"},
                 {"WORLD_SIZE", "2"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"SLURM_PROCID", "7"},
                 {"SLURM_NTASKS", "16"},
                 {"SLURM_LOCALID", "3"},
                 {"SLURM_NTASKS_PER_NODE", "not-read"},
                 {"SLURM_JOB_NODELIST", "n[4-5]"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, "RANK/WORLD_SIZE environment");
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->world_size, 2);
  EXPECT_EQ(e->local_rank, 1);
  // Without MASTER_ADDR the job's first node is still the best guess for rank 0's host.
  EXPECT_EQ(e->master_addr, "n4");
}

TEST(RankEnvironment, MalformedTorchrunVariablesNameTheVariable) {
  const Variables ok = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}};
  auto with = [&ok](const Variables& changes) {
    Variables v = ok;
    for (const auto& [name, value] : changes) v[name] = value;
    return v;
  };
  expect_error_naming(with({{"RANK", "abc"}}), "RANK='abc'");
  expect_error_naming(with({{"RANK", "-1"}}), "RANK=-1");
  expect_error_naming(with({{"RANK", " 1"}}), "RANK=' 1'");
  expect_error_naming(with({{"RANK", "1.5"}}), "RANK='1.5'");
  expect_error_naming(with({{"RANK", ""}}), "RANK=''");
  expect_error_naming(with({{"RANK", "2"}}), "RANK=2 is not below WORLD_SIZE=2");
  expect_error_naming(with({{"WORLD_SIZE", "0"}}), "WORLD_SIZE=0");
  expect_error_naming(with({{"WORLD_SIZE", "99999999999"}}),
                      "WORLD_SIZE='99999999999' is beyond the largest number it may hold (2147483647)");
  expect_error_naming({{"RANK", "0"}}, "WORLD_SIZE");
  expect_error_naming({{"WORLD_SIZE", "1"}}, "RANK");
  expect_error_naming(with({{"LOCAL_RANK", "x"}}), "LOCAL_RANK='x'");
  expect_error_naming(with({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}), "LOCAL_RANK=2");
  expect_error_naming(with({{"LOCAL_WORLD_SIZE", "4"}}), "LOCAL_WORLD_SIZE=4 exceeds WORLD_SIZE=2");
  expect_error_naming(with({{"LOCAL_WORLD_SIZE", "0"}}), "LOCAL_WORLD_SIZE=0");
  expect_error_naming(with({{"MASTER_PORT", "0"}}), "MASTER_PORT=0");
  expect_error_naming(with({{"MASTER_PORT", "65536"}}), "MASTER_PORT=65536");
  expect_error_naming(with({{"MASTER_PORT", "http"}}), "MASTER_PORT='http'");
  expect_error_naming(with({{"MASTER_ADDR", ""}}), "MASTER_ADDR is empty");
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "MASTER_ADDR is not set");
  expect_error_naming({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_JOB_NODELIST", "n[1-"}}, "SLURM_JOB_NODELIST");
}

TEST(RankEnvironment, MalformedSlurmVariablesNameTheVariable) {
  const Variables ok = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n1"}};
  auto with = [&ok](const Variables& changes) {
    Variables v = ok;
    for (const auto& [name, value] : changes) v[name] = value;
    return v;
  };
  expect_error_naming(with({{"SLURM_PROCID", "x"}}), "SLURM_PROCID='x'");
  expect_error_naming(with({{"SLURM_PROCID", "2"}}), "SLURM_PROCID=2 is not below SLURM_NTASKS=2");
  expect_error_naming(with({{"SLURM_NTASKS", "0"}}), "SLURM_NTASKS=0");
  expect_error_naming(with({{"SLURM_LOCALID", "-3"}}), "SLURM_LOCALID=-3");
  expect_error_naming(with({{"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "1"}}), "SLURM_LOCALID=1");
  expect_error_naming(with({{"SLURM_NTASKS_PER_NODE", "3"}}), "SLURM_NTASKS_PER_NODE=3 exceeds SLURM_NTASKS=2");
  expect_error_naming(with({{"SLURM_TASKS_PER_NODE", "2(x"}}), "SLURM_TASKS_PER_NODE='2(x'");
  expect_error_naming(with({{"SLURM_TASKS_PER_NODE", "1(x2)"}, {"SLURM_NODEID", "2"}}), "SLURM_TASKS_PER_NODE");
  expect_error_naming(with({{"SLURM_NODEID", "x"}, {"SLURM_TASKS_PER_NODE", "2"}}), "SLURM_NODEID='x'");
  expect_error_naming(with({{"SLURM_JOB_NODELIST", "n[1-2"}}), "SLURM_JOB_NODELIST='n[1-2'");
  expect_error_naming({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "]"}}, "SLURM_NODELIST");
  expect_error_naming({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}, "MASTER_ADDR is not set");
  expect_error_naming(with({{"MASTER_PORT", "-5"}}), "MASTER_PORT=-5");
}

TEST(RankEnvironment, SlurmTasksPerNodeList) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("4", -1), std::nullopt);
  for (const char* malformed : {"", "0", "a", "2(x0)", "2(3)", "2(x3", "2(x)", "2,", ",2", "-2"}) {
    EXPECT_EQ(slurm_tasks_on_node(malformed, 0), std::nullopt) << malformed;
  }
}

TEST(SlurmHostlist, FirstHost) {
  EXPECT_EQ(first_slurm_host("a"), "a");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("n[1-3]"), "n1");
  EXPECT_EQ(first_slurm_host("n[01-04,07]"), "n01");
  EXPECT_EQ(first_slurm_host("node[01-04,07],gpu3"), "node01");
  EXPECT_EQ(first_slurm_host("gpu3,node[01-04,07]"), "gpu3");
  EXPECT_EQ(first_slurm_host("n[7,1-3]"), "n7");
  EXPECT_EQ(first_slurm_host("rack[2]-n[5-6]"), "rack2-n5");
  EXPECT_EQ(first_slurm_host("rack[2-3]-n[05-06],x"), "rack2-n05");
  EXPECT_EQ(first_slurm_host("node-1.cluster"), "node-1.cluster");
}

TEST(SlurmHostlist, MalformedListsHaveNoFirstHost) {
  for (const char* malformed : {"", ",a", "n[1-3", "n]1", "n[]", "n[a-b]", "n[1-]", "n[-1]", "n[1,]", "n[[1]]",
                                "n[1-3]]", "a,", "a,,b", "a,b[1"}) {
    EXPECT_EQ(first_slurm_host(malformed), std::nullopt) << malformed;
  }
}

}  // namespace
}  // namespace loco::comm
