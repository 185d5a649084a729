#include "common/token_file.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace harmony::common {
namespace {

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

template <typename T>
std::string WriteTokens(const std::string& name, const std::vector<T>& tokens,
                        const std::string& npy_descr = "") {
  const std::string path = Tmp(name);
  std::ofstream out(path, std::ios::binary);
  if (!npy_descr.empty()) {
    std::string header = absl::StrCat("{'descr': '", npy_descr,
                                      "', 'fortran_order': False, 'shape': (", tokens.size(),
                                      ",), }");
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    out.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&len), 2);
    out << header;
  }
  out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(T));
  return path;
}

// Resident memory of this process mapped from files, in bytes (RssFile):
// what a mapping keeps resident (the tensors' heap is RssAnon).
uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "RssFile:") {
      uint64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

TEST(TokenFileTest, SequentialWindowsOfAFlatFile) {
  std::vector<uint16_t> tokens(101);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 7 % 50);
  auto f = TokenFile::Open(WriteTokens("flat.bin", tokens), TokenType::kUint16, 10);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tokens(), 101);
  EXPECT_EQ((*f)->windows(), 10);
  EXPECT_EQ((*f)->Start(3, false, 0), 30);
  EXPECT_EQ((*f)->Start(13, false, 0), 30);  // Wraps around.
  auto w = (*f)->Window(30, 50);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->numel(), 11);
  for (int i = 0; i < 11; ++i) EXPECT_EQ((*w)[i].item<int64_t>(), (30 + i) * 7 % 50);
  auto d = (*f)->Samples(0, 4, false, 0, 50);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->inputs[0].sizes(), (std::vector<int64_t>{4, 10}));
  EXPECT_TRUE(at::equal(d->inputs[0].narrow(1, 1, 9), d->targets[0].narrow(1, 0, 9)));
  EXPECT_EQ(d->targets[0][3][9].item<int64_t>(), 40 * 7 % 50);
}

TEST(TokenFileTest, NpyFilesSayTheirType) {
  std::vector<uint32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(70000 + i);
  auto f = TokenFile::Open(WriteTokens("tokens.npy", tokens, "<u4"), std::nullopt, 8);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->type(), TokenType::kUint32);
  EXPECT_EQ((*f)->tokens(), 40);
  auto w = (*f)->Window(5, 0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)[0].item<int64_t>(), 70005);
  std::vector<float> floats(20, 1.0f);
  auto bad = TokenFile::Open(WriteTokens("floats.npy", floats, "<f4"), std::nullopt, 8);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("dtype f4"), std::string::npos)
      << bad.status();
}

TEST(TokenFileTest, BadFilesAndOutOfRangeTokensAreNamed) {
  std::vector<uint16_t> tokens(50, 3);
  tokens[23] = 900;
  const std::string path = WriteTokens("range.bin", tokens);
  auto f = TokenFile::Open(path, TokenType::kUint16, 10);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->Window(0, 512).ok());  // Tokens 0-10: in range.
  auto w = (*f)->Window(20, 512);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find("token 23 (byte offset 46) is 900, outside "
                                                  "the model's vocabulary of 512"),
            std::string::npos)
      << w.status();
  auto no_type = TokenFile::Open(path, std::nullopt, 10);
  EXPECT_NE(std::string(no_type.status().message()).find("--token-dtype"), std::string::npos);
  auto odd = TokenFile::Open(WriteTokens("odd.bin", std::vector<uint8_t>(11, 1)),
                             TokenType::kUint16, 4);
  EXPECT_NE(std::string(odd.status().message()).find("not a whole number of uint16 tokens"),
            std::string::npos)
      << odd.status();
  auto short_file = TokenFile::Open(path, TokenType::kUint16, 50);
  EXPECT_NE(std::string(short_file.status().message()).find("holds 50 tokens; a sample needs"),
            std::string::npos);
  EXPECT_FALSE(TokenFile::Open(Tmp("missing.bin"), TokenType::kUint16, 4).ok());
}

TEST(TokenFileTest, RandomWindowsAreAFunctionOfTheSampleAndStayInside) {
  std::vector<uint16_t> tokens(1000, 1);
  auto f = TokenFile::Open(WriteTokens("random.bin", tokens), TokenType::kUint16, 16);
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < 2000; ++i) {
    const int64_t s = (*f)->Start(i, true, 7);
    EXPECT_GE(s, 0);
    EXPECT_LE(s + 17, 1000);
    EXPECT_EQ(s, (*f)->Start(i, true, 7));
    starts.push_back(s);
  }
  EXPECT_NE((*f)->Start(5, true, 7), (*f)->Start(5, true, 8));
  EXPECT_GT(*std::max_element(starts.begin(), starts.end()), 950);
  EXPECT_LT(*std::min_element(starts.begin(), starts.end()), 50);
}

// A 3 GiB file (sparse: all token 0) read at 40,000 random windows (80-160 MiB of pages): the
// mapping's pages leave resident memory after each copy.
TEST(TokenFileTest, ResidentMemoryDoesNotGrowWithTheFile) {
  const std::string path = Tmp("large.bin");
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(::ftruncate(fileno(f), 3LL << 30), 0);
    std::fclose(f);
  }
  auto f = TokenFile::Open(path, TokenType::kUint16, 1024);
  ASSERT_TRUE(f.ok()) << f.status();
  // The code a window runs is mapped from files too: fault it in first.
  for (int64_t i = 0; i < 100; ++i) ASSERT_TRUE((*f)->Window((*f)->Start(i, false, 1), 0).ok());
  const uint64_t before = ResidentBytes();
  for (int64_t i = 0; i < 40000; ++i) {
    auto w = (*f)->Window((*f)->Start(i, true, 1), 50000);
    ASSERT_TRUE(w.ok()) << w.status();
  }
  const uint64_t after = ResidentBytes();
  std::printf("3 GiB token file, 40000 random windows of 1025 tokens: resident from files %.1f "
              "MiB before, %.1f MiB after\n", before / 1048576.0, after / 1048576.0);
  EXPECT_LT(after, before + (16ULL << 20));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace harmony::common
