(define (problem blocksworld-p07)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 b4 b5 b6 - block
  )
  (:init
    (arm-empty)
    (clear b2)
    (clear b3)
    (clear b4)
    (clear b6)
    (on b3 b5)
    (on b4 b1)
    (on-table b1)
    (on-table b2)
    (on-table b5)
    (on-table b6)
  )
  (:goal (and
    (on b1 b2)
    (on b5 b3)
  )))
