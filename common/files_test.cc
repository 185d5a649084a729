#include "common/files.h"

#include <string>

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(FilesTest, WriteAtomicallyThenRead) {
  std::string path = TempPath("atomic.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string("second\0x", 8)).ok());
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, std::string("second\0x", 8));
}

// A writer that writes the file itself (a model's save) writes the
// temporary path, which then replaces the file; a writer that fails leaves
// the old file and no temporary one.
TEST(FilesTest, WriteAtomicallyWithAWriterOfItsOwn) {
  const std::string path = TempPath("atomic-with.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  std::string given;
  absl::Status ok = WriteFileAtomicallyWith(path, [&](const std::string& tmp) {
    given = tmp;
    EXPECT_NE(tmp, path);
    return WriteFileAtomically(tmp, "new");  // Any writer of a path.
  });
  ASSERT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(*ReadFileToString(path), "new");
  EXPECT_EQ(ReadFileToString(given).status().code(), absl::StatusCode::kNotFound);

  absl::Status failed = WriteFileAtomicallyWith(path, [&](const std::string& tmp) {
    given = tmp;
    EXPECT_TRUE(WriteFileAtomically(tmp, "half").ok());
    return absl::DataLossError("the writer stopped halfway");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss) << failed;
  EXPECT_EQ(*ReadFileToString(path), "new");
  EXPECT_EQ(ReadFileToString(given).status().code(), absl::StatusCode::kNotFound);

  // A writer that says it wrote but left nothing fails naming the file.
  absl::Status none = WriteFileAtomicallyWith(path, [](const std::string&) {
    return absl::OkStatus();
  });
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find(".tmp."), absl::string_view::npos) << none;
  EXPECT_EQ(*ReadFileToString(path), "new");
}

TEST(FilesTest, MissingFileIsNotFoundAndNamesThePath) {
  std::string path = TempPath("does-not-exist.bin");
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(contents.status().message().find(path), absl::string_view::npos);
  EXPECT_EQ(Sha256OfFile(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(FilesTest, WriteIntoMissingDirectoryFails) {
  absl::Status status =
      WriteFileAtomically(TempPath("no/such/dir/file.txt"), "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
}

TEST(FilesTest, DirectoryIsNotAFile) {
  absl::StatusOr<std::string> contents = ReadFileToString(::testing::TempDir());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Sha256Test, KnownVectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Bytes("abc").size(), 32u);
}

TEST(Sha256Test, FileDigestMatchesInMemoryDigestAcrossChunks) {
  // Larger than the 1 MiB read chunk, so several updates are combined.
  std::string data;
  for (int i = 0; i < 700000; ++i) {
    data += static_cast<char>('a' + i % 26);
    data += static_cast<char>('0' + i % 7);
  }
  ASSERT_GT(data.size(), 1u << 20);
  std::string path = TempPath("big.bin");
  ASSERT_TRUE(WriteFileAtomically(path, data).ok());
  absl::StatusOr<std::string> digest = Sha256OfFile(path);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, Sha256Hex(data));
  data[12345] ^= 1;
  EXPECT_NE(*digest, Sha256Hex(data));
}

}  // namespace
}  // namespace harmony::common
